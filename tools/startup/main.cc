// hoop-startup: how long a job takes to start and what a rank costs once it runs. Each rank
// initialises from the environment, then runs an AllReduce (verified exactly), a Barrier and a
// Broadcast (verified), and rank 0 prints the start-up time (first rank's start to last
// rank's communicator), the slowest rank's init, and per-rank memory (resident, proportional
// share of shared pages, peak) with the links each rank connected.
//   hoop-run -n 512 --store-stats -- hoop-startup
#include <fmt/format.h>
#include <time.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "hoop/communicator.h"
#include "hoop/error.h"

namespace {

using namespace hoop;

int64_t realtime_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);  // one clock for every rank of the machine
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

// A "Name:   123 kB" line of a /proc file, in bytes (0 when absent).
int64_t proc_kib_field(const char* path, const std::string& name) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(name + ":", 0) == 0) return std::stoll(line.substr(name.size() + 1)) * 1024;
  }
  return 0;
}

struct Figures {
  int64_t rss = 0, pss = 0, peak = 0, links = 0;
};

Figures measure(Communicator& comm) {
  Figures f;
  f.rss = proc_kib_field("/proc/self/status", "VmRSS");
  f.peak = proc_kib_field("/proc/self/status", "VmHWM");
  f.pss = proc_kib_field("/proc/self/smaps_rollup", "Pss");
  f.links = static_cast<int64_t>(comm.stats().links.size());
  return f;
}

std::string mib(int64_t b) { return fmt::format("{:.1f} MiB", static_cast<double>(b) / (1 << 20)); }

}  // namespace

int main(int argc, char** argv) {
  const int64_t started = realtime_ns();
  CLI::App app{"hoop-startup: start-up time and per-rank memory of a job"};
  size_t count = 1024;
  bool init_only = false;
  app.add_option("-c,--count", count, "elements of the AllReduce (i64) and the Broadcast (i32)");
  app.add_flag("--init-only", init_only, "create the communicator and exit (no collectives, no report)");
  CLI11_PARSE(app, argc, argv);
  try {
    auto comm = Communicator::from_env();
    const int64_t ready = realtime_ns();
    const int n = comm->size(), r = comm->rank();
    const Figures after_init = measure(*comm);

    // AllReduce: rank r contributes r + i; the sum is exact in i64.
    std::vector<int64_t> send(count), recv(count);
    for (size_t i = 0; i < count; ++i) send[i] = r + static_cast<int64_t>(i);
    if (init_only) return 0;
    const int64_t t0 = realtime_ns();
    comm->allreduce(send.data(), recv.data(), count, DataType::i64, RedOp::sum);
    const std::string allreduce_algo = comm->last_algorithm();
    const int64_t t1 = realtime_ns();
    int64_t wrong = 0;
    for (size_t i = 0; i < count; ++i) {
      wrong += recv[i] != int64_t{n} * (n - 1) / 2 + int64_t{n} * static_cast<int64_t>(i);
    }
    comm->barrier();
    const std::string barrier_algo = comm->last_algorithm();
    const int64_t t2 = realtime_ns();
    std::vector<int32_t> bcast(count, r == n / 2 ? 7 : -1);
    comm->broadcast(bcast.data(), bcast.data(), count, DataType::i32, n / 2);
    const std::string broadcast_algo = comm->last_algorithm();
    const int64_t t3 = realtime_ns();
    wrong += std::count_if(bcast.begin(), bcast.end(), [](int32_t v) { return v != 7; });
    const Figures after_ops = measure(*comm);

    // One AllReduce of the figures each (max and sum), one for the earliest start. Over the
    // tree: they are the tool's bookkeeping, not what it measures. On 512 ranks of 2 cores the
    // tuner takes shm-direct for AllReduces this small, and there each call took 9-28 s (each
    // rank waits for its 511 peers' flags one by one; 3-4 ms a call on 128 ranks); the tree
    // took 0.16-0.2 s.
    std::vector<int64_t> mine = {ready - started, after_init.rss, after_ops.rss, after_ops.pss,
                                 after_ops.peak,  after_ops.links, wrong,        ready,
                                 t1 - t0,        t2 - t1,        t3 - t2};
    std::vector<int64_t> maxes(mine.size()), sums(mine.size());
    OpOptions tree;
    tree.algo = "tree";
    comm->allreduce(mine.data(), maxes.data(), mine.size(), DataType::i64, RedOp::max, tree);
    comm->allreduce(mine.data(), sums.data(), mine.size(), DataType::i64, RedOp::sum, tree);
    int64_t first_start = 0;
    comm->allreduce(&started, &first_start, 1, DataType::i64, RedOp::min, tree);
    if (r == 0) {
      auto mean = [&](size_t i) { return sums[i] / n; };
      fmt::print("hoop-startup: {} ranks up in {:.2f} s (first rank's start to last rank's communicator); "
                 "init {:.2f} s on the slowest rank, {:.2f} s on average\n",
                 n, static_cast<double>(maxes[7] - first_start) * 1e-9, static_cast<double>(maxes[0]) * 1e-9,
                 static_cast<double>(mean(0)) * 1e-9);
      fmt::print("hoop-startup: allreduce {} x i64 ({}, {:.3f} s), barrier ({}, {:.3f} s), broadcast {} x i32 ({}, "
                 "{:.3f} s; the slowest rank's times, the first call of each): {}\n",
                 count, allreduce_algo, static_cast<double>(maxes[8]) * 1e-9, barrier_algo,
                 static_cast<double>(maxes[9]) * 1e-9, count, broadcast_algo, static_cast<double>(maxes[10]) * 1e-9,
                 sums[6] == 0 ? "correct on every rank" : fmt::format("{} WRONG elements", sums[6]));
      fmt::print("hoop-startup: per rank after init: resident {} max, {} mean\n", mib(maxes[1]), mib(mean(1)));
      fmt::print("hoop-startup: per rank after the collectives: resident {} max, {} mean; proportional {} max, "
                 "{} mean; peak {} max; links {} max, {:.1f} mean\n",
                 mib(maxes[2]), mib(mean(2)), mib(maxes[3]), mib(mean(3)), mib(maxes[4]), maxes[5],
                 static_cast<double>(sums[5]) / n);
      std::fflush(stdout);
    }
    return sums[6] == 0 ? 0 : 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "hoop-startup: %s\n", e.what());
    return 1;
  }
}
