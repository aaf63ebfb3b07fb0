// hoop-topo: what hoop sees of a job, printed by rank 0: the hosts and their local ranks, the
// link class and addresses of every rank, the ring order, the trees (and any other registered
// AllReduce schedule's communication graph), the cost model (alpha/beta/gamma) and the
// tuner's picks. --params prints every HOOP_* variable instead (no job needed).
//   hoop-run -n 4 -- hoop-topo
//   hoop-topo --params
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "comm/algo_choice.h"
#include "comm/comm_access.h"
#include "core/params.h"
#include "schedule/schedule.h"

namespace {

using namespace hoop;

std::string human_bytes(uint64_t b) {
  if (b >= (1ull << 30)) return fmt::format("{}G", b >> 30);
  if (b >= (1ull << 20)) return fmt::format("{}M", b >> 20);
  if (b >= (1ull << 10)) return fmt::format("{}K", b >> 10);
  return fmt::format("{}B", b);
}

// Per rank: whom it receives from and sends to over the whole schedule, in first-use order.
void print_graph(const std::string& algo, OpType op, int n, const schedule::Topology& topo, int max_ranks) {
  schedule::CollectiveDesc d;
  d.op = op;
  d.count = static_cast<size_t>(n) * 16;
  d.nranks = n;
  d.topology = &topo;
  fmt::print("{} {} (count {}):\n", to_string(op), algo, d.count);
  for (int r = 0; r < n && r < max_ranks; ++r) {
    schedule::RankSchedule s;
    try {
      s = schedule::build(algo, d, r);
    } catch (const Error& e) {
      fmt::print("  not applicable: {}\n", e.detail());
      return;
    }
    std::vector<int> from, to;
    for (const auto& step : s.steps) {
      for (const auto& a : step.actions) {
        // Shared-region reads and waits (shm-direct) hear from their peer like receives; its
        // writes into a peer's buffer send to it.
        const bool sends = a.kind == schedule::ActionKind::send || a.kind == schedule::ActionKind::write;
        const bool hears = !sends && a.kind != schedule::ActionKind::publish && a.peer >= 0 &&
                           (a.kind == schedule::ActionKind::recv_copy || a.kind == schedule::ActionKind::recv_reduce ||
                            schedule::is_region_action(a.kind));
        auto& list = hears ? from : to;
        if (a.peer < 0 || a.peer == r || (!hears && !sends)) continue;
        if (std::find(list.begin(), list.end(), a.peer) == list.end()) list.push_back(a.peer);
      }
    }
    fmt::print("  rank {:>3}: {:>3} steps, receives from [{}], sends to [{}]\n", r, s.steps.size(),
               fmt::join(from, " "), fmt::join(to, " "));
  }
  if (n > max_ranks) fmt::print("  ... ({} more ranks)\n", n - max_ranks);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"hoop-topo: hosts, ranks, links, rings, trees and the cost model of a job (run under hoop-run)",
               "hoop-topo"};
  int max_ranks = 64;
  bool show_params = false;
  app.add_option("--max-ranks", max_ranks, "print per-rank lines for at most this many ranks")->capture_default_str();
  app.add_flag("--params", show_params,
               "print every HOOP_* variable, its value and where it came from (default, environment "
               "or launcher), and exit");
  CLI11_PARSE(app, argc, argv);
  if (show_params) {
    for (const auto& p : params::all()) fmt::print("{}\n", params::describe(p.id));
    return 0;
  }
  std::shared_ptr<Communicator> comm;
  try {
    comm = Communicator::from_env();
    auto& impl = detail::CommAccess::impl(*comm);
    const int n = comm->size();
    if (comm->rank() == 0) {
      auto& tuner = impl.tuner();
      const auto& topo = tuner.topology();
      const auto links = tuner.links();
      const auto& peers = impl.peers();
      fmt::print("hoop-topo: {} rank{} on {} host{}\n", n, n == 1 ? "" : "s", topo.nhosts(), topo.nhosts() == 1 ? "" : "s");
      fmt::print("hosts:\n");
      for (int h = 0; h < topo.nhosts(); ++h) {
        const auto ranks = topo.ranks_of_host(h);
        fmt::print("  host {} ({}): {} local rank{}: {}\n", h, peers[static_cast<size_t>(ranks.front())].host_id,
                   ranks.size(), ranks.size() == 1 ? "" : "s", fmt::join(ranks, " "));
      }
      fmt::print("ranks (link class from rank 0; TCP listener addresses):\n");
      for (int r = 0; r < n && r < max_ranks; ++r) {
        const auto& p = peers[static_cast<size_t>(r)];
        const auto ranks = topo.ranks_of_host(topo.host_of_rank[static_cast<size_t>(r)]);
        const int local = static_cast<int>(std::find(ranks.begin(), ranks.end(), r) - ranks.begin());
        fmt::print("  rank {:>3}: host {}, local rank {}, pid {}, {} from rank 0, tcp {}\n", r,
                   topo.host_of_rank[static_cast<size_t>(r)], local, p.pid,
                   r == 0 ? "-" : tuner::to_string(links.between(0, r)), fmt::join(p.tcp, " "));
      }
      std::map<std::string, int> pair_count;
      for (int a = 0; a < n; ++a)
        for (int b = a + 1; b < n; ++b) ++pair_count[tuner::to_string(links.between(a, b))];
      fmt::print("links: {} shm pair{}, {} tcp pair{}\n", pair_count["shm"], pair_count["shm"] == 1 ? "" : "s",
                 pair_count["tcp"], pair_count["tcp"] == 1 ? "" : "s");
      std::string ring;
      for (int r = 0; r < n; ++r) {
        ring += fmt::format("{} -{}-> ", r, n == 1 ? "" : tuner::to_string(links.between(r, (r + 1) % n)));
      }
      fmt::print("ring order: {}0\n", ring);
      const auto allreduce_algos = schedule::algorithms_for(OpType::allreduce);
      for (const auto& algo : allreduce_algos) {
        if (algo == "ring") continue;
        print_graph(algo, OpType::allreduce, n, topo, max_ranks);
      }
      if (std::find(allreduce_algos.begin(), allreduce_algos.end(), "tree") == allreduce_algos.end()) {
        fmt::print("trees: no 'tree' algorithm registered\n");
      }
      fmt::print("{}", tuner::to_table(tuner.model()));
      fmt::print("tuner's picks (f32):\n");
      for (OpType op : {OpType::allreduce, OpType::reducescatter, OpType::allgather, OpType::broadcast, OpType::reduce}) {
        std::string line;
        for (uint64_t bytes : {1ull << 10, 64ull << 10, 1ull << 20, 64ull << 20}) {
          schedule::CollectiveDesc d;
          d.op = op;
          d.nranks = n;
          d.count = bytes / 4;
          d.region = impl.region_shape(DataType::f32);
          if (op == OpType::reducescatter || op == OpType::allgather) d.count = std::max<size_t>(1, d.count / static_cast<size_t>(n));
          const auto pick = tuner::Tuner::best(tuner.price_all(d, 4, detail::candidate_algorithms(op), detail::channels_from_env()));
          line += fmt::format("  {}: {} ({:.1f} us)", human_bytes(bytes), pick.algorithm.empty() ? "-" : pick.algorithm,
                              pick.predicted_seconds * 1e6);
        }
        fmt::print("  {:<14}{}\n", std::string(to_string(op)), line);
      }
      std::fflush(stdout);
    }
    comm->barrier();
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "hoop-topo: %s\n", e.what());
    if (comm) comm->abort(e.what());
    return 1;
  }
}
