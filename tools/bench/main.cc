// hoop-bench: nccl-tests style bandwidth and latency of hoop's collectives.
//   hoop-run -n 4 -- hoop-bench allreduce -b 1K -e 64M -f 4
// Every rank runs the same sizes; rank 0 prints the table. The exit status is non-zero when
// any element was wrong.
#include <unistd.h>

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <optional>
#include <string>

#include "bench_args.h"
#include "bench_math.h"
#include "comm/comm_access.h"
#include "explain.h"
#include "report.h"
#include "runner.h"
#include "schedule/schedule.h"
#include "world.h"

namespace hoop::bench {
namespace {

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

// Rank 0 alone can tell whether its output files open; the others learn it by broadcast so
// that every rank stops together.
std::optional<Report> open_report(Communicator& comm, const BenchConfig& cfg) {
  std::optional<Report> report;
  int32_t ok = 1;
  std::string problem;
  if (comm.rank() == 0) {
    try {
      report.emplace(cfg, RunInfo{comm.size(), comm.local_size(), host_name()});
    } catch (const Error& e) {
      ok = 0;
      problem = e.detail();
    }
  }
  comm.broadcast(&ok, &ok, 1, DataType::i32, 0);
  if (ok == 0) {
    if (problem.empty()) problem = "rank 0 cannot write its output files";
    throw UsageError(2, "hoop-bench: " + problem + "\n");
  }
  return report;
}

int run_benchmark(Communicator& comm, const BenchConfig& cfg) {
  if (has_root(cfg.collective) && cfg.root >= comm.size()) {
    throw UsageError(2, fmt::format("hoop-bench: --root {} is not a rank of {}\n", cfg.root,
                                    comm.size()));
  }
  // What can run here (shm-direct needs every rank on this host and shared memory): the
  // registry says; "all" skips the rest.
  const auto available = schedule::algorithms_for(cfg.collective, detail::CommAccess::impl(comm).reach());
  const auto algos = resolve_algos(cfg.algos, available);
  const auto layouts = plan_layouts(size_sequence(cfg.sizes), cfg.collective,
                                    dtype_size(cfg.dtype), comm.size(), cfg.uneven);
  std::optional<Report> report = open_report(comm, cfg);
  CollectiveRunner runner(comm, cfg, layouts);

  if (report) report->print_header();
  uint64_t wrong = 0;
  for (const std::string& algo : algos) {
    if (report) report->begin_section(algo);
    for (const Layout& layout : layouts) {
      const RowResult row = runner.run(layout, algo);
      wrong += row.out_of_place.wrong.value_or(0);
      if (row.in_place) wrong += row.in_place->wrong.value_or(0);
      if (report) report->add_row(row);
      if (report && cfg.explain) print_explanation(comm, cfg, layout, row);
    }
    if (report) report->end_section();
  }
  if (report) report->finish();
  return wrong == 0 ? 0 : 1;
}

}  // namespace
}  // namespace hoop::bench

int main(int argc, char** argv) {
  using namespace hoop;
  using namespace hoop::bench;
  BenchConfig cfg;
  try {
    cfg = parse_bench_args(argc, argv);
  } catch (const UsageError& e) {
    std::fputs(e.what(), e.exit_code == 0 ? stdout : stderr);
    return e.exit_code;
  }

  CommOptions opts;
  if (cfg.timeout_seconds) {
    opts.timeout = std::chrono::milliseconds(static_cast<int64_t>(*cfg.timeout_seconds * 1000.0));
  }
  World world;
  try {
    world = join_world(opts);
    return run_benchmark(*world.comm, cfg);
  } catch (const UsageError& e) {
    // Every rank reaches the same verdict; rank 0 speaks for them.
    if (!world.comm || world.comm->rank() == 0) std::fputs(e.what(), stderr);
    return e.exit_code;
  } catch (const Error& e) {
    std::fprintf(stderr, "hoop-bench: %s\n", e.what());
    // Tell the peers rather than leave them waiting for this rank until their timeout.
    if (world.comm) world.comm->abort(e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hoop-bench: %s\n", e.what());
    if (world.comm) world.comm->abort(e.what());
    return 1;
  }
}
