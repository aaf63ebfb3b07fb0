// The command line of hoop-bench (nccl-tests' flags), parsed with CLI11. Header-only so the
// unit tests can include it.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_math.h"
#include "hoop/types.h"

namespace hoop::bench {

struct BenchConfig {
  OpType collective = OpType::allreduce;
  SizeSteps sizes;
  int iters = 20;
  int warmup_iters = 5;
  bool check = true;
  RedOp op = RedOp::sum;
  DataType dtype = DataType::f32;
  int root = 0;
  RankCombine combine = RankCombine::max;
  // As given to --algo, split at commas ("all" and "auto" not yet expanded); empty: auto.
  std::vector<std::string> algos;
  std::string csv_path;
  std::string json_path;
  bool blocking = true;
  std::optional<double> timeout_seconds;
  bool explain = false;  // print the tuner's predictions beside each row
  bool uneven = false;   // the v-forms: an uneven split of S among ranks (bench_math.h)
  bool stats = false;    // min, max and standard deviation over iterations beside the median
  bool registered = false;  // buffers in registered memory (Communicator::alloc): zero copy
};

// A command line that does not parse; `exit_code` 0 with the help text for --help.
struct UsageError : std::runtime_error {
  UsageError(int code, const std::string& text) : std::runtime_error(text), exit_code(code) {}
  int exit_code;
};

inline constexpr const char* kCollectiveNames =
    "allreduce | reducescatter | allgather | broadcast | reduce | alltoall | gather | scatter | "
    "alltoallv | gatherv | scatterv | allgatherv | reducescatterv";

inline std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(text);
  while (std::getline(in, part, ',')) {
    if (!part.empty()) parts.push_back(part);
  }
  return parts;
}

inline BenchConfig parse_bench_args(const std::vector<std::string>& args) {
  BenchConfig cfg;
  CLI::App app{
      "hoop-bench: bandwidth and latency of hoop's collectives, nccl-tests style.\n"
      "Sizes are per-rank buffer bytes: the whole buffer for allreduce, broadcast and reduce,\n"
      "the send buffer of reducescatter and scatter (the root's), what each rank sends in all\n"
      "for alltoall, the recv buffer of allgather and gather (the root's); the v-forms like\n"
      "their even forms. Each row's time is the median over the timed iterations of the\n"
      "per-iteration time combined over ranks (-a).",
      "hoop-bench"};
  std::string collective, min_text = "1K", max_text = "32M", op_text = "sum",
              dtype_text = "f32", algo_text, step_text;
  uint64_t factor = 2;
  int check = 1, blocking = 1, average = 3;
  double timeout = 0;

  app.add_option("collective", collective, kCollectiveNames)->required();
  app.add_option("-b,--minbytes", min_text, "smallest size (1K, 64M, 1G...)")
      ->capture_default_str();
  app.add_option("-e,--maxbytes", max_text, "largest size")->capture_default_str();
  auto* factor_opt = app.add_option("-f,--stepfactor", factor, "multiply the size by this")
                         ->capture_default_str();
  auto* step_opt = app.add_option("-i,--stepbytes", step_text, "add this many bytes to the size");
  factor_opt->excludes(step_opt);
  app.add_option("-n,--iters", cfg.iters, "timed iterations per size")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  app.add_option("-w,--warmup_iters", cfg.warmup_iters, "untimed iterations before them")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000000));
  app.add_option("-c,--check", check, "verify the results (0/1)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1));
  app.add_option("-o,--op", op_text, "sum | prod | min | max | avg")->capture_default_str();
  app.add_option("-d,--datatype", dtype_text,
                 "f32 | f64 | f16 | bf16 | i8 | u8 | i32 | u32 | i64 | u64")
      ->capture_default_str();
  app.add_option("-r,--root", cfg.root, "root of broadcast, reduce, gather(v) and scatter(v)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("-a,--average", average,
                 "combine the ranks' time of an iteration: 0 rank 0, 1 mean, 2 min, 3 max")
      ->capture_default_str()
      ->check(CLI::Range(0, 3));
  app.add_option("--algo", algo_text,
                 "algorithm(s): NAME[,NAME...], 'all' or 'auto' (default: HOOP_ALGO or the "
                 "tuner); one table section each");
  app.add_option("--csv", cfg.csv_path, "also write the rows to this CSV file");
  app.add_option("--json", cfg.json_path, "also write the rows to this JSON file");
  app.add_option("-z,--blocking", blocking,
                 "1: time each blocking call; 0: issue all iterations asynchronously, then wait")
      ->capture_default_str()
      ->check(CLI::Range(0, 1));
  app.add_flag("--explain", cfg.explain,
               "below each row, the predicted time of every algorithm and the tuner's pick");
  app.add_flag("--uneven", cfg.uneven,
               "v-forms: split S unevenly, rank k's block in proportion to k % 3 (ranks 0, 3, "
               "6... get none)");
  app.add_flag("--stats", cfg.stats,
               "min, max and standard deviation over iterations beside the median time");
  app.add_flag("--registered", cfg.registered,
               "buffers in registered memory (Communicator::alloc): collectives read and write the "
               "peers' buffers in place");
  app.add_option("--timeout", timeout, "seconds an operation may stall before failing")
      ->check(CLI::PositiveNumber);

  // CLI11 wants argv-style input in reverse order.
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    std::ostringstream out, err;
    const int code = app.exit(e, out, err);
    throw UsageError(code == 0 ? 0 : 2, code == 0 ? out.str() : err.str());
  }

  auto fail = [](const std::string& what) -> UsageError {
    return UsageError(2, "hoop-bench: " + what + "\nRun with --help for more information.\n");
  };
  const auto coll = parse_optype(collective);
  if (!coll || !is_benchmarked(*coll)) {
    throw fail("unknown collective '" + collective + "' (" + kCollectiveNames + ")");
  }
  cfg.collective = *coll;
  if (cfg.uneven && !is_vector_op(cfg.collective)) {
    throw fail("--uneven is for the v-forms (alltoallv, gatherv, scatterv, allgatherv, "
               "reducescatterv)");
  }
  const auto min_bytes = parse_bytes(min_text);
  if (!min_bytes) throw fail("bad --minbytes '" + min_text + "'");
  const auto max_bytes = parse_bytes(max_text);
  if (!max_bytes) throw fail("bad --maxbytes '" + max_text + "'");
  if (*min_bytes > *max_bytes) throw fail("--minbytes is larger than --maxbytes");
  cfg.sizes.min_bytes = *min_bytes;
  cfg.sizes.max_bytes = *max_bytes;
  if (step_opt->count() > 0) {
    const auto step = parse_bytes(step_text);
    if (!step) throw fail("bad --stepbytes '" + step_text + "'");
    if (*step == 0) throw fail("--stepbytes must be at least 1");
    cfg.sizes.factor = 1;
    cfg.sizes.step_bytes = *step;
  } else {
    if (factor < 2) throw fail("--stepfactor must be at least 2");
    cfg.sizes.factor = factor;
  }
  const auto op = parse_redop(op_text);
  if (!op) throw fail("unknown op '" + op_text + "' (sum, prod, min, max, avg)");
  cfg.op = *op;
  const auto dt = parse_dtype(dtype_text);
  if (!dt) {
    throw fail("unknown datatype '" + dtype_text +
               "' (f32, f64, f16, bf16, i8, u8, i32, u32, i64, u64)");
  }
  cfg.dtype = *dt;
  cfg.check = check == 1;
  cfg.blocking = blocking == 1;
  cfg.combine = static_cast<RankCombine>(average);
  cfg.algos = split_commas(algo_text);
  if (timeout > 0) cfg.timeout_seconds = timeout;
  return cfg;
}

inline BenchConfig parse_bench_args(int argc, const char* const* argv) {
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  return parse_bench_args(args);
}

// The algorithms to run, one table section each, in the order asked: `available` are the
// names the library knows for the collective; "all" expands to all of them, "auto" (or no
// --algo) lets the library choose and is returned as the empty name. Unknown names are
// rejected with the list.
inline std::vector<std::string> resolve_algos(const std::vector<std::string>& requested,
                                              const std::vector<std::string>& available) {
  std::vector<std::string> out;
  auto add = [&out](const std::string& name) {
    for (const auto& have : out) {
      if (have == name) return;
    }
    out.push_back(name);
  };
  if (requested.empty()) add("");
  for (const auto& name : requested) {
    if (name == "auto") {
      add("");
    } else if (name == "all") {
      for (const auto& a : available) add(a);
    } else if (std::find(available.begin(), available.end(), name) != available.end()) {
      add(name);
    } else {
      std::string list;
      for (const auto& a : available) list += a + ", ";
      throw UsageError(2, "hoop-bench: unknown algorithm '" + name + "' (available: " + list +
                              "auto, all)\n");
    }
  }
  return out;
}

}  // namespace hoop::bench
