#include "options.h"

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <exception>
#include <map>

namespace hoop::train {

TrainOptions parse_options(int argc, char** argv) {
  TrainOptions o;
  CLI::App app{
      "hoop-train: trains a small MLP data-parallel with DDP (stage 0) or ZeRO 1-3.\n"
      "  hoop-run -n 4 -- hoop-train --stage 2\n"
      "  hoop-train --plan --params 7.5e9 --ranks 64"};
  app.add_flag("--plan", o.plan, "print per-rank model-state memory of every ZeRO stage, exit");
  app.add_option("--params", o.plan_params, "--plan: parameter count")->check(CLI::PositiveNumber);
  app.add_option("--ranks", o.plan_ranks, "--plan: rank count")->check(CLI::PositiveNumber);

  app.add_option("--stage", o.dp.stage, "ZeRO stage: 0 (DDP), 1, 2, 3")->check(CLI::Range(0, 3));
  const std::map<std::string, dp::Precision> precisions{{"f32", dp::Precision::f32},
                                                        {"bf16", dp::Precision::bf16}};
  app.add_option("--precision", o.dp.precision, "f32, or bf16 (mixed: f32 master weights)")
      ->transform(CLI::CheckedTransformer(precisions));
  const std::map<std::string, dp::OptimizerKind> kinds{{"adam", dp::OptimizerKind::adam},
                                                       {"adamw", dp::OptimizerKind::adamw},
                                                       {"sgd", dp::OptimizerKind::sgd}};
  app.add_option("--optimizer", o.dp.optimizer.kind, "adam, adamw or sgd")
      ->transform(CLI::CheckedTransformer(kinds));
  app.add_option("--lr", o.dp.optimizer.lr, "learning rate");
  app.add_option("--weight-decay", o.dp.optimizer.weight_decay, "weight decay");
  app.add_option("--momentum", o.dp.optimizer.momentum, "SGD momentum");
  double first_kb = 1024, bucket_kb = 25600;
  app.add_option("--first-bucket-kb", first_kb, "first gradient bucket (KiB)")
      ->check(CLI::PositiveNumber);
  app.add_option("--bucket-kb", bucket_kb, "later gradient buckets (KiB)")
      ->check(CLI::PositiveNumber);
  bool no_prefetch = false;
  app.add_flag("--no-prefetch", no_prefetch, "stage 3: do not gather the next layer ahead");
  bool unregistered = false;
  app.add_flag("--unregistered", unregistered,
               "communication buffers in private memory (default: registered, zero copy on one host)");
  app.add_option("--algo", o.dp.op_options.algo, "force a collective algorithm (e.g. ring)");
  app.add_option("--compress", o.dp.compress,
                 "gradient communication hook: none, bf16, fp16, powersgd[:r][:warmup=K], "
                 "onebit[:warmup=K][:chunk=C][:refresh=R]")
      ->check([](const std::string& spec) {
        try {
          dp::make_comm_hook(spec);
        } catch (const std::exception& e) {
          return std::string(e.what());
        }
        return std::string();
      });

  app.add_option("--data", o.data, "auto, digits, synthetic or a digits-style .csv.gz");
  app.add_option("--hidden", o.hidden, "hidden layer sizes")->delimiter(',');
  const std::map<std::string, model::Activation> acts{{"relu", model::Activation::relu},
                                                      {"gelu", model::Activation::gelu}};
  app.add_option("--activation", o.activation, "relu or gelu")
      ->transform(CLI::CheckedTransformer(acts));
  app.add_option("--steps", o.steps, "training steps")->check(CLI::NonNegativeNumber);
  app.add_option("--batch", o.batch, "global batch (split over the ranks)")
      ->check(CLI::PositiveNumber);
  app.add_option("--print-every", o.print_every, "steps per printed line (0: about 15 lines)");
  app.add_option("--seed", o.seed, "seed of weights, data split and batch order");
  app.add_option("--save", o.save_dir, "write a sharded checkpoint to this directory");
  app.add_option("--save-at", o.save_at, "step after which to save (default: the last)");
  app.add_option("--load", o.load_dir, "start from the checkpoint in this directory");
  app.add_option("--checkpoint-dir", o.checkpoint_dir,
                 "elastic: resume from this directory's latest checkpoint if any, save into it, "
                 "and train until --steps steps in all");
  app.add_option("--checkpoint-every", o.checkpoint_every, "steps between elastic checkpoints")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--fail-at-step", o.fail_at_step,
                 "fault injection: the last rank dies (SIGKILL) after this step, first attempt only; "
                 "with --redundancy 1, --fail-rank dies during this step")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--fail-rank", o.fail_rank, "the rank --fail-at-step kills (default: the last)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--redundancy", o.dp.redundancy,
                 "1: keep a copy of the ring successor's states in memory and survive a dead rank "
                 "without a restart (0: none)")
      ->check(CLI::Range(0, 1));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::exit(app.exit(e));
  }
  o.dp.first_bucket_bytes = static_cast<size_t>(first_kb * 1024);
  o.dp.bucket_bytes = static_cast<size_t>(bucket_kb * 1024);
  o.dp.prefetch = !no_prefetch;
  o.dp.registered = !unregistered;
  return o;
}

}  // namespace hoop::train
