// hoop-train: trains the built-in MLP data-parallel (DDP or ZeRO 1-3) on the handwritten
// digits python3-sklearn ships (or synthetic data) and reports, per printed step, loss,
// accuracy, step time, communication time and how much of it hid behind compute, and the
// per-rank model-state memory measured against the ZeRO formula; with --compress, the
// gradients go through a communication hook and each line gives the bytes sent per step.
//   hoop-run -n 4 -- hoop-train --stage 2
//   hoop-run -n 4 -- hoop-train --compress powersgd:4
//   hoop-train --plan --params 7.5e9 --ranks 64
#include <fmt/format.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <vector>

#include "bootstrap/env_init.h"
#include "core/params.h"
#include "hoop/communicator.h"
#include "hoop/dp.h"
#include "model/dataset.h"
#include "model/mlp.h"
#include "options.h"
#include "elastic.h"
#include "planner.h"

namespace hoop::train {
namespace {

bool launched_by_a_launcher() {
  for (const char* v : {"HOOP_RANK", "RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK"}) {
    if (params::raw(std::string_view(v))) return true;
  }
  return false;
}

model::Dataset load_data(const TrainOptions& o, int rank) {
  if (o.data == "synthetic") return model::make_synthetic(2048, 64, 10, 1.5f, o.seed);
  if (o.data == "auto" || o.data == "digits") {
    if (auto path = model::find_digits_file()) return model::load_digits(*path);
    if (o.data == "digits") {
      throw std::runtime_error("digits.csv.gz not found (install python3-sklearn)");
    }
    if (rank == 0) std::printf("digits.csv.gz not found: synthetic data instead\n");
    return model::make_synthetic(2048, 64, 10, 1.5f, o.seed);
  }
  return model::load_digits(o.data);
}

std::string mb(double bytes) { return fmt::format("{:.3f}", bytes / 1e6); }

// Bytes a rank sends per step without a hook, with bandwidth-optimal collectives (ring): an
// AllReduce of the gradients (stage 0), a ReduceScatter and an AllGather of the shard per
// bucket (1, 2), and at stage 3 also an AllGather per layer before forward and backward.
double uncompressed_bytes_per_step(const dp::DataParallel& dp, const dp::DpConfig& cfg) {
  const double n = dp.world_size();
  const double elem = cfg.precision == dp::Precision::bf16 ? 2 : 4;
  if (cfg.stage == 0) return 2 * (n - 1) / n * static_cast<double>(dp.num_params()) * elem;
  const double gathers = cfg.stage == 3 ? 3 : 2;
  return gathers * (n - 1) * static_cast<double>(dp.shard_elements()) * elem;
}

// Every rank's memory, printed by rank 0 beside the formula.
void print_memory(Communicator* comm, const dp::DataParallel& dp) {
  const dp::MemoryReport m = dp.memory();
  std::vector<uint64_t> mine = {m.current.params, m.current.grads, m.current.optimizer,
                                m.peak.comm, m.peak_total, m.current.redundancy};
  const int n = dp.world_size();
  std::vector<uint64_t> all(mine.size() * static_cast<size_t>(n));
  if (comm) {
    comm->allgather(mine.data(), all.data(), mine.size(), DataType::u64);
  } else {
    all = mine;
  }
  if (dp.rank() != 0) return;
  const double formula = dp.model_state_formula_bytes();
  std::printf("memory per rank (MB, 1 MB = 1e6 B), psi = %zu parameters, shard = %zu elements\n",
              dp.num_params(), dp.shard_elements());
  std::printf("%-5s %9s %9s %9s %12s %12s %9s %12s %11s %9s\n", "rank", "params", "grads", "optim",
              "model-states", "formula", "diff", "comm(peak)", "peak total", "copies");
  for (int r = 0; r < n; ++r) {
    const uint64_t* v = all.data() + static_cast<size_t>(r) * mine.size();
    const double states = static_cast<double>(v[0] + v[1] + v[2]);
    std::printf("%-5d %9s %9s %9s %12s %12s %+8.2f%% %12s %11s %9s\n", r,
                mb(static_cast<double>(v[0])).c_str(), mb(static_cast<double>(v[1])).c_str(),
                mb(static_cast<double>(v[2])).c_str(), mb(states).c_str(), mb(formula).c_str(),
                100.0 * (states - formula) / formula, mb(static_cast<double>(v[3])).c_str(),
                mb(static_cast<double>(v[4])).c_str(), mb(static_cast<double>(v[5])).c_str());
  }
}

int train(const TrainOptions& o) {
  std::shared_ptr<Communicator> comm;
  // A rank started in place of a dead one (hoop-run --elastic) joins the running group.
  const bool joining = o.dp.redundancy == 1 && params::integer(params::Id::join) == 1;
  if (joining) {
    const bootstrap::EnvInit e = bootstrap::read_init_env();
    JoinParams jp;
    jp.store = connect_tcp_store(e.store_host, e.store_port);
    jp.job_id = e.job_id;
    comm = Communicator::join(jp);
  } else if (launched_by_a_launcher()) {
    comm = Communicator::from_env();
  }
  int rank = comm ? comm->rank() : 0;
  int ranks = comm ? comm->size() : 1;
  const int fail_rank = o.fail_rank >= 0 ? o.fail_rank : ranks - 1;
  const bool survive = o.dp.redundancy == 1 && comm;

  const model::Dataset all = load_data(o, rank);
  const auto [train_set, test_set] = model::split(all, 0.15, o.seed);
  std::vector<int> dims{all.features};
  dims.insert(dims.end(), o.hidden.begin(), o.hidden.end());
  dims.push_back(all.classes);
  model::Mlp mlp(model::MlpConfig{dims, o.activation, o.seed});

  dp::DataParallel dp(comm, o.dp);
  mlp.register_params(dp);
  if (joining) {
    dp.join_group();  // the members' states, re-sharded over the grown group
    rank = dp.rank();
    ranks = dp.world_size();
  } else {
    dp.finalize();
  }
  std::string load_dir = o.load_dir;
  if (!o.checkpoint_dir.empty()) {
    if (auto latest = elastic::latest_checkpoint(o.checkpoint_dir)) load_dir = *latest;
  }
  if (!load_dir.empty()) dp.load(load_dir);
  const uint64_t first_step = dp.steps_done();
  // With a checkpoint directory --steps counts every step of the run, across restarts.
  const int steps_to_run = o.checkpoint_dir.empty() && !joining
                               ? o.steps
                               : std::max(0, o.steps - static_cast<int>(first_step));
  const bool first_attempt = params::integer(params::Id::restart_count) == 0;

  if (rank == 0 && !joining) {
    std::string shape;
    for (size_t i = 0; i < dims.size(); ++i) shape += (i ? "-" : "") + std::to_string(dims[i]);
    std::printf("hoop-train: ZeRO stage %d%s on %d rank(s), %s, MLP %s (%zu parameters), %s, "
                "gradients: %s\n",
                o.dp.stage, o.dp.stage == 0 ? " (DDP)" : "", ranks,
                o.dp.precision == dp::Precision::bf16 ? "bf16 + f32 master" : "f32",
                shape.c_str(), dp.num_params(),
                o.dp.optimizer.kind == dp::OptimizerKind::sgd ? "SGD" : "Adam",
                o.dp.compress.c_str());
    std::printf("data: %s, %zu training / %zu test rows; global batch %d; %zu gradient bucket(s):",
                all.name.c_str(), train_set.size(), test_set.size(), o.batch, dp.buckets().size());
    for (const auto& b : dp.buckets()) std::printf(" %.1f KiB", static_cast<double>(b.bytes) / 1024);
    std::printf("\n");
    if (first_step > 0) std::printf("resumed from %s at step %llu\n", load_dir.c_str(),
                                    static_cast<unsigned long long>(first_step));
    std::printf("%6s %9s %7s %9s %9s %9s %8s %11s %8s   (rank 0, mean per step since the last "
                "line; ratio: bytes without a hook over bytes sent)\n",
                "step", "loss", "acc", "step ms", "comm ms", "hidden ms", "overlap", "sent KiB",
                "ratio");
  }
  const double none_bytes = uncompressed_bytes_per_step(dp, o.dp);
  auto bytes_sent = [&] { return dp.bytes_sent(); };
  double sent_total = 0;

  const int every = o.print_every > 0 ? o.print_every : std::max(1, steps_to_run / 15);
  std::vector<float> x;
  std::vector<int> y;
  double loss_acc = 0, correct_acc = 0, count_acc = 0, time_acc = 0, comm_acc = 0, hidden_acc = 0,
         sent_acc = 0;
  int lines_steps = 0;
  bool memory_printed = joining;  // the members printed theirs before this rank came
  const int world_rank = rank;
  // With --redundancy 1 the time a failure costs: from the failed step's start to the end of
  // its redo.
  std::chrono::steady_clock::time_point failed_step_start{};
  bool failed = false;
  for (int i = 0; i < steps_to_run;) {
    const uint64_t step = first_step + static_cast<uint64_t>(i);
    const auto rows = model::rank_share(
        model::global_batch(train_set.size(), o.batch, step, o.seed), rank, ranks);
    model::gather_rows(train_set, rows, x, y);
    const uint64_t sent0 = bytes_sent();
    const auto t0 = std::chrono::steady_clock::now();
    // d(sum of local losses)/dz * N / B: the average over ranks is the global batch mean.
    const float scale = static_cast<float>(ranks) / static_cast<float>(o.batch);
    const bool dies_now = survive && world_rank == fail_rank && step + 1 == static_cast<uint64_t>(o.fail_at_step);
    model::BatchResult r;
    double metrics[3] = {0, 0, 0};
    bool ok = true;
    try {
      r = mlp.train_batch(dp, x.data(), y.data(), static_cast<int>(rows.size()), scale, [&](int layer) {
        if (dies_now && layer == mlp.num_layers() - 1) {
          std::fflush(stdout);
          ::raise(SIGKILL);  // while the first gradient buckets are being reduced
        }
      });
      dp.step();
      metrics[0] = r.loss_sum;
      metrics[1] = static_cast<double>(r.correct);
      metrics[2] = static_cast<double>(r.count);
      if (comm) comm->allreduce(metrics, metrics, 3, DataType::f64, RedOp::sum);
    } catch (const Error&) {
      if (!survive) throw;
      ok = false;
    }
    if (survive && !dp.commit(ok)) {
      i = static_cast<int>(dp.steps_done() - first_step);  // the last commit may be this step
      // Back at the last commit over the survivors: the step is done again, on a new share.
      if (!failed) failed_step_start = t0;
      failed = true;
      comm = dp.communicator();
      rank = dp.rank();
      ranks = dp.world_size();
      if (rank == 0) {
        std::printf("step %llu failed; recovered in memory in %.3f s, going on with %d ranks\n",
                    static_cast<unsigned long long>(step + 1), dp.last_recovery_seconds(), ranks);
      }
      continue;
    }
    ++i;
    if (failed) {
      const double lost = std::chrono::duration<double>(t0 - failed_step_start).count();
      if (rank == 0) {
        std::printf("time lost to the failure: %.3f s (the failed step, the recovery; step %llu redone "
                    "on %d ranks; no disk read)\n",
                    lost, static_cast<unsigned long long>(step + 1), ranks);
      }
      failed = false;
    }
    if (survive && dp.world_size() != ranks) {
      // Newcomers were taken in at this commit (a replaced rank): the next step is theirs too.
      comm = dp.communicator();
      rank = dp.rank();
      if (rank == 0) {
        std::printf("after step %llu: %d rank(s) joined, training goes on with %d ranks\n",
                    static_cast<unsigned long long>(step + 1), dp.world_size() - ranks, dp.world_size());
      }
      ranks = dp.world_size();
    }
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double sent = static_cast<double>(bytes_sent() - sent0);
    sent_acc += sent;
    sent_total += sent;
    const dp::CommTiming ct = dp.last_step_comm();
    loss_acc += metrics[0];
    correct_acc += metrics[1];
    count_acc += metrics[2];
    time_acc += dt;
    comm_acc += ct.comm_seconds;
    hidden_acc += ct.hidden_seconds();
    ++lines_steps;
    if (!memory_printed) {
      print_memory(comm.get(), dp);
      memory_printed = true;
    }
    if (i % every == 0 || i == steps_to_run) {
      if (rank == 0) {
        const double k = lines_steps;
        const std::string ratio =
            sent_acc > 0 ? fmt::format("{:.1f}x", none_bytes * k / sent_acc) : "-";
        std::printf("%6llu %9.4f %7.4f %9.3f %9.3f %9.3f %7.1f%% %11.1f %8s\n",
                    static_cast<unsigned long long>(step + 1), loss_acc / count_acc,
                    correct_acc / count_acc, 1e3 * time_acc / k, 1e3 * comm_acc / k,
                    1e3 * hidden_acc / k, comm_acc > 0 ? 100.0 * hidden_acc / comm_acc : 0.0,
                    sent_acc / k / 1024, ratio.c_str());
        std::fflush(stdout);
      }
      loss_acc = correct_acc = count_acc = time_acc = comm_acc = hidden_acc = sent_acc = 0;
      lines_steps = 0;
    }
    if (!o.save_dir.empty() && o.save_at > 0 && step + 1 == static_cast<uint64_t>(o.save_at)) {
      dp.save(o.save_dir);
      if (rank == 0) std::printf("saved checkpoint of step %d to %s\n", o.save_at, o.save_dir.c_str());
    }
    if (!o.checkpoint_dir.empty() && o.checkpoint_every > 0 && (step + 1) % static_cast<uint64_t>(o.checkpoint_every) == 0) {
      elastic::save_checkpoint(dp, comm.get(), o.checkpoint_dir, step + 1);
      if (rank == 0) std::printf("checkpoint of step %llu in %s\n", static_cast<unsigned long long>(step + 1),
                                 o.checkpoint_dir.c_str());
    }
    if (!survive && o.fail_at_step > 0 && first_attempt && step + 1 == static_cast<uint64_t>(o.fail_at_step) &&
        rank == fail_rank) {
      std::fflush(stdout);
      ::raise(SIGKILL);  // a rank dying mid-run, for restart tests
    }
  }
  if (!o.save_dir.empty() && o.save_at <= 0) {
    dp.save(o.save_dir);
    if (rank == 0) std::printf("saved checkpoint to %s\n", o.save_dir.c_str());
  }
  print_memory(comm.get(), dp);

  // Every rank evaluates its share of the test rows (stage 3 gathers layers: all take part).
  std::vector<int> test_rows(test_set.size());
  for (size_t i = 0; i < test_rows.size(); ++i) test_rows[i] = static_cast<int>(i);
  const auto mine = model::rank_share(test_rows, rank, ranks);
  model::gather_rows(test_set, mine, x, y);
  const model::BatchResult e = mlp.evaluate(dp, x.data(), y.data(), static_cast<int>(mine.size()));
  double metrics[3] = {e.loss_sum, static_cast<double>(e.correct), static_cast<double>(e.count)};
  if (comm) comm->allreduce(metrics, metrics, 3, DataType::f64, RedOp::sum);
  if (rank == 0) {
    if (steps_to_run > 0 && ranks > 1 && sent_total == 0) {
      std::printf("bytes sent: not counted by shared memory's direct path; HOOP_TRANSPORT=tcp "
                  "counts them\n");
    } else if (steps_to_run > 0 && ranks > 1) {
      std::printf("bytes sent by rank 0: %.1f KiB per step (%s; %.1f KiB without a hook)\n",
                  sent_total / steps_to_run / 1024, o.dp.compress.c_str(), none_bytes / 1024);
    }
    std::printf("final test accuracy %.4f (%d/%d), test loss %.4f, after %llu steps\n",
                metrics[1] / metrics[2], static_cast<int>(metrics[1]), static_cast<int>(metrics[2]),
                metrics[0] / metrics[2], static_cast<unsigned long long>(dp.steps_done()));
  }
  return 0;
}

}  // namespace
}  // namespace hoop::train

int main(int argc, char** argv) {
  const hoop::train::TrainOptions o = hoop::train::parse_options(argc, argv);
  try {
    if (o.plan) {
      std::fputs(hoop::train::plan_table(o.plan_params, o.plan_ranks, hoop::dp::Precision::bf16,
                                         o.dp.optimizer).c_str(), stdout);
      if (o.dp.precision == hoop::dp::Precision::f32) {
        std::printf("\n");
        std::fputs(hoop::train::plan_table(o.plan_params, o.plan_ranks, hoop::dp::Precision::f32,
                                           o.dp.optimizer).c_str(), stdout);
      }
      return 0;
    }
    return hoop::train::train(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hoop-train: %s\n", e.what());
    return 1;
  }
}
