// hoop-sim: the library's schedules and cost model at any scale, with no network. For each
// size, the predicted time and bus bandwidth of every algorithm that applies, the bytes per
// rank, per link and per host, the step counts, and the tuner's pick.
//   hoop-sim --ranks 4096 --hosts 512 --link 200Gbps --latency 5us allreduce -b 1K -e 1G -f 2
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../bench/bench_math.h"
#include "comm/algo_choice.h"
#include "core/errors.h"
#include "core/op_traits.h"
#include "transport/shm/shm_transport.h"
#include "tuner/tuner.h"
#include "plot_script.h"
#include "units.h"

namespace {

using namespace hoop;

std::string human_bytes(double b) {
  const char* units[] = {"B", "K", "M", "G", "T", "P"};
  int u = 0;
  while (b >= 1024 && u < 5) {
    b /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{:.0f}{}", b, units[u]) : fmt::format("{:.1f}{}", b, units[u]);
}

struct SimArgs {
  int ranks = 8;
  int hosts = 0;           // 0: from ranks_per_host, else one rank per host
  int ranks_per_host = 0;  // 0: from hosts
  std::string link, latency, stream, shm_bw, shm_latency, shm_ring, reduce_bw, model_file;
  std::string sustained, burst, cpu, cpu_per_kib, handoff, skew;
  int machines = 0;  // 0: one per host
  int cores = -1;    // -1: the model's
  std::string collective, min_text = "1K", max_text = "1G", dtype_text = "f32", algo_text, json_file;
  uint64_t factor = 2;
  int root = 0;
  int nchannels = 0;
  bool exact = false;
  bool uneven = false;
  std::string plot_file;
  int threads = 0;  // 0: one per core
};

// Runs body(0..n-1) on up to `threads` threads (0: one per core), each taking the next index;
// the first exception is rethrown here once all are done.
void parallel_for(size_t n, int threads, const std::function<void(size_t)>& body) {
  const size_t cores = std::max(1u, std::thread::hardware_concurrency());
  const size_t workers = std::min(n, threads > 0 ? static_cast<size_t>(threads) : cores);
  std::atomic<size_t> next{0};
  std::exception_ptr failure;
  std::mutex failure_mu;
  auto work = [&] {
    for (size_t i; (i = next++) < n;) {
      try {
        body(i);
      } catch (...) {
        std::lock_guard lk(failure_mu);
        if (!failure) failure = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < workers; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
}

// Writes the plot of the predictions in `json_file` to `png` (plot_script.h); false on failure.
bool write_plot(const std::string& json_file, const std::string& png) {
  const std::string script = json_file + ".plot.py";
  {
    std::ofstream out(script);
    out << hoop::sim::kPlotScript;
    if (!out) return false;
  }
  const std::string command = fmt::format("/usr/bin/python3 '{}' '{}' '{}'", script, json_file, png);
  const int status = std::system(command.c_str());
  std::remove(script.c_str());
  return status == 0;
}

[[noreturn]] void usage_error(const std::string& what) {
  std::fprintf(stderr, "hoop-sim: %s\nRun with --help for more information.\n", what.c_str());
  std::exit(2);
}

double rate_or_die(const std::string& text, const char* flag) {
  const auto v = hoop::sim::parse_rate(text);
  if (!v || *v <= 0) usage_error(fmt::format("bad {} '{}' (e.g. 200Gbps, 25GB/s)", flag, text));
  return *v;
}
double duration_or_die(const std::string& text, const char* flag) {
  const auto v = hoop::sim::parse_duration(text);
  if (!v) usage_error(fmt::format("bad {} '{}' (e.g. 5us, 1.5ms)", flag, text));
  return *v;
}
uint64_t bytes_or_die(const std::string& text, const char* flag, uint64_t at_least = 0) {
  const auto v = hoop::bench::parse_bytes(text);
  if (!v || *v < at_least) usage_error(fmt::format("bad {} '{}' (e.g. 256K, 16M)", flag, text));
  return *v;
}

}  // namespace

int main(int argc, char** argv) {
  SimArgs a;
  CLI::App app{
      "hoop-sim: predicted time of hoop's algorithms from their schedules and the cost model, at\n"
      "any number of ranks, with no network. Sizes are per-rank buffer bytes as in hoop-bench.",
      "hoop-sim"};
  app.add_option("collective", a.collective, "allreduce | reducescatter | allgather | broadcast | reduce | alltoall | gather | scatter | allgatherv | "
                 "reducescatterv | barrier")
      ->required();
  app.add_option("--ranks", a.ranks, "number of ranks")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  auto* hosts_opt = app.add_option("--hosts", a.hosts, "hosts, ranks spread in blocks (default: one rank per host)")
                        ->check(CLI::Range(1, 1 << 20));
  app.add_option("--ranks-per-host", a.ranks_per_host, "ranks per host (instead of --hosts)")
      ->check(CLI::Range(1, 1 << 20))
      ->excludes(hosts_opt);
  app.add_option("--link", a.link, "a host's network rate (tcp endpoint), e.g. 200Gbps, 25GB/s");
  app.add_option("--stream", a.stream, "rate of one connection (default: --link)");
  app.add_option("--latency", a.latency, "per-message latency between hosts, e.g. 5us");
  app.add_option("--shm-bw", a.shm_bw, "shared-memory copy rate of a rank");
  app.add_option("--shm-latency", a.shm_latency, "per-message latency within a host");
  app.add_option("--shm-ring", a.shm_ring, "a shared-memory link's ring, e.g. 16M (default: HOOP_SHM_RING_BYTES, else what a host of these ranks gets)");
  app.add_option("--reduce-bw", a.reduce_bw, "reduction rate of a core, e.g. 10GB/s");
  app.add_option("--sustained", a.sustained,
                 "what a host's link sustains over a whole operation when it takes bursts at --link "
                 "(a token bucket), e.g. 950Mbps");
  app.add_option("--burst", a.burst,
                 "bytes such a link passes at --link after a pause (the bucket's depth), e.g. 256K: what a "
                 "direction regains while the other works");
  app.add_option("--cpu", a.cpu, "processor time of a message between hosts at each end, e.g. 8us");
  app.add_option("--cpu-per-kib", a.cpu_per_kib, "processor time per KiB between hosts at each end, e.g. 0.5us");
  app.add_option("--handoff", a.handoff,
                 "what waiting for a peer between hosts that must run first adds per rank of a core when ranks "
                 "outnumber the cores, e.g. 8us");
  app.add_option("--skew", a.skew,
                 "what a call between hosts loses once when ranks outnumber the cores, its ranks starting it out "
                 "of step, e.g. 100us");
  app.add_option("--machines", a.machines,
                 "machines the hosts run on, in blocks (default: one per host; a lab of namespaces: 1)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--cores", a.cores, "cores of a machine, shared by its ranks (default: the model's, or unknown)")
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("--model", a.model_file, "a cost model JSON file (a calibration cache file works)");
  app.add_option("-b,--minbytes", a.min_text, "smallest size")->capture_default_str();
  app.add_option("-e,--maxbytes", a.max_text, "largest size")->capture_default_str();
  app.add_option("-f,--stepfactor", a.factor, "size factor")->capture_default_str()->check(CLI::Range(2, 1 << 20));
  app.add_option("-d,--datatype", a.dtype_text, "element type")->capture_default_str();
  app.add_option("-r,--root", a.root, "root of broadcast, reduce, gather and scatter")->capture_default_str();
  app.add_option("--algo", a.algo_text, "only these algorithms (NAME[,NAME...])");
  app.add_option("--nchannels", a.nchannels, "force the channel count")->check(CLI::Range(1, 64));
  app.add_option("--json", a.json_file, "also write every prediction to this JSON file");
  app.add_option("--plot", a.plot_file, "also draw time and busbw against size to this PNG file");
  app.add_option("--threads", a.threads, "threads pricing sizes at once (default: one per core)")
      ->check(CLI::Range(1, 1024));
  app.add_flag("--uneven", a.uneven, "allgatherv, reducescatterv: blocks as hoop-bench --uneven (else even)");
  app.add_flag("--exact", a.exact,
               "walk every rank's schedule (slow at scale) instead of pricing one rank per class of "
               "symmetric ranks");
  CLI11_PARSE(app, argc, argv);

  try {
    const auto op = parse_optype(a.collective);
    // Sizes and busbw as hoop-bench counts them; the v-forms whose counts only each rank knows
    // (alltoallv, gatherv, scatterv) are not priced: every rank's schedule needs its own counts.
    if (!op || (!hoop::bench::is_benchmarked(*op) && *op != OpType::barrier) || has_per_rank_count(*op)) {
      usage_error(fmt::format("unknown collective '{}'", a.collective));
    }
    const auto dt = parse_dtype(a.dtype_text);
    if (!dt) usage_error(fmt::format("unknown datatype '{}'", a.dtype_text));
    const auto min_b = hoop::bench::parse_bytes(a.min_text), max_b = hoop::bench::parse_bytes(a.max_text);
    if (!min_b || !max_b || *min_b > *max_b) usage_error("bad size range");
    if (a.root < 0 || a.root >= a.ranks) usage_error(fmt::format("--root {} is not a rank of {}", a.root, a.ranks));

    // Topology: ranks in blocks of `per` consecutive ranks per host.
    const int per = a.ranks_per_host > 0 ? a.ranks_per_host
                    : a.hosts > 0        ? (a.ranks + a.hosts - 1) / a.hosts
                                         : 1;
    schedule::Topology topo;
    for (int r = 0; r < a.ranks; ++r) topo.host_of_rank.push_back(r / per);

    tuner::CostModel model = a.model_file.empty() ? tuner::CostModel{} : tuner::load_model_file(a.model_file);
    if (a.model_file.empty()) model.source = "hoop-sim defaults";
    if (!a.link.empty()) {
      model.tcp.endpoint_beta = rate_or_die(a.link, "--link");
      model.tcp.beta = model.tcp.endpoint_beta;
    }
    if (!a.stream.empty()) model.tcp.beta = rate_or_die(a.stream, "--stream");
    if (!a.latency.empty()) model.tcp.alpha = duration_or_die(a.latency, "--latency");
    if (!a.shm_bw.empty()) model.shm.beta = model.shm.endpoint_beta = rate_or_die(a.shm_bw, "--shm-bw");
    if (!a.shm_latency.empty()) model.shm.alpha = duration_or_die(a.shm_latency, "--shm-latency");
    // The rings a job of these hosts would get (HOOP_SHM_RING_BYTES, else the default for a host
    // of `per` ranks), not those of the job that wrote a --model file.
    if (a.shm_ring.empty()) {
      model.shm_ring_bytes = transport::ring_bytes_for_host(std::min(per, a.ranks));
      model.shm_ring_full_bytes = transport::full_ring_bytes();
    } else {
      model.shm_ring_bytes = model.shm_ring_full_bytes = static_cast<size_t>(bytes_or_die(a.shm_ring, "--shm-ring", 1));
    }
    if (!a.reduce_bw.empty()) model.gamma = 1.0 / rate_or_die(a.reduce_bw, "--reduce-bw");
    if (!a.sustained.empty()) model.tcp.sustained = rate_or_die(a.sustained, "--sustained");
    if (!a.burst.empty()) model.tcp.burst = static_cast<double>(bytes_or_die(a.burst, "--burst"));
    if (!a.cpu.empty()) model.tcp.cpu = duration_or_die(a.cpu, "--cpu");
    if (!a.cpu_per_kib.empty()) model.tcp.cpu_byte = duration_or_die(a.cpu_per_kib, "--cpu-per-kib") / 1024;
    if (!a.handoff.empty()) model.tcp.handoff = duration_or_die(a.handoff, "--handoff");
    if (!a.skew.empty()) model.tcp.skew = duration_or_die(a.skew, "--skew");
    if (a.cores >= 0) model.cores = a.cores;
    // Machines: hosts in blocks of `hosts_per_machine` consecutive hosts.
    std::vector<int> machine_of_rank;
    if (a.machines > 0) {
      const int hosts_per_machine = (topo.nhosts() + a.machines - 1) / a.machines;
      for (int h : topo.host_of_rank) machine_of_rank.push_back(h / hosts_per_machine);
    }

    std::vector<std::string> names = hoop::detail::candidate_algorithms(*op);
    if (!a.algo_text.empty()) {
      names.clear();
      std::string item;
      for (char ch : a.algo_text + ",") {
        if (ch != ',') { item += ch; continue; }
        if (!item.empty()) names.push_back(item);
        item.clear();
      }
    }
    const std::optional<int> channels = a.nchannels > 0 ? std::optional<int>(a.nchannels) : std::nullopt;
    tuner::Tuner tuner(model, topo, tuner::LinkView::Force::none);
    tuner.set_machines(machine_of_rank);
    tuner.set_pricing(a.exact ? tuner::Pricing::full_walk : tuner::Pricing::symmetric);

    const size_t elem = dtype_size(*dt);
    const bool half_reduce = is_half_reduction(*dt, *op);
    const size_t priced_elem = half_reduce ? sizeof(float) : elem;
    hoop::bench::SizeSteps steps;
    steps.min_bytes = *min_b;
    steps.max_bytes = *max_b;
    steps.factor = a.factor;
    // A barrier moves no data: one row.
    const auto layouts = *op == OpType::barrier
                             ? std::vector<hoop::bench::Layout>(1)
                             : hoop::bench::plan_layouts(hoop::bench::size_sequence(steps), *op, elem, a.ranks, a.uneven);

    std::printf("# hoop-sim %s: %d ranks on %d hosts (%d per host)%s, %s%s\n", a.collective.c_str(), a.ranks,
                topo.nhosts(), per,
                a.machines > 0 ? fmt::format(" on {} machine(s)", a.machines).c_str() : "", a.dtype_text.c_str(),
                has_root(*op) ? fmt::format(", root {}", a.root).c_str() : "");
    std::fputs(tuner::to_table(model).c_str(), stdout);
    std::printf("# %s\n", a.exact ? "every rank's schedule walked (--exact)"
                           : a.ranks <= 256
                               ? "every rank evaluated (the ring: one rank per class of symmetric ranks)"
                               : "the ring, hierarchical: one rank per class of symmetric ranks; the tree: every "
                                 "rank; the others: sampled ranks evaluated (whole hosts: rank 0's, the last "
                                 "rank's, the root's, spread ones; ranks in lockstep)");
    std::printf("#\n# %12s %12s  %-20s %3s %12s %12s %8s %10s %10s %10s\n", "size", "count", "algorithm", "ch",
                "time(us)", "busbw(GB/s)", "steps", "sent/rank", "max/link", "tcp/host");
    const double factor = hoop::bench::busbw_factor(*op, a.ranks);
    nlohmann::json rows = nlohmann::json::array();
    // The sizes are priced on as many threads as there are cores, and printed in order.
    std::vector<std::vector<tuner::Candidate>> priced_rows(layouts.size());
    parallel_for(layouts.size(), a.threads, [&](size_t i) {
      const auto& l = layouts[i];
      schedule::CollectiveDesc d;
      d.op = *op;
      d.count = l.op_count;
      d.nranks = a.ranks;
      d.root = a.root;
      if (is_vector_op(*op)) {
        // allgatherv, reducescatterv: every rank names every block, the same on every rank.
        auto blocks = std::make_shared<schedule::BlockLayout>();
        blocks->send = blocks->recv = schedule::Blocks::packed(l.blocks);
        d.blocks = blocks;
        d.count = l.count;
      }
      d.topology = &tuner.topology();
      priced_rows[i] = tuner.price_all(d, priced_elem, names, channels);
    });
    for (size_t i = 0; i < layouts.size(); ++i) {
      const auto& l = layouts[i];
      const auto& priced = priced_rows[i];
      const auto pick = tuner::Tuner::best(priced);
      bool first = true;
      for (const auto& c : priced) {
        const auto& p = c.prediction;
        const std::string size_col = first ? fmt::format("{:12} {:12}", l.bytes, l.count) : fmt::format("{:25}", "");
        first = false;
        nlohmann::json row = {{"size_bytes", l.bytes}, {"count", l.count}, {"algorithm", c.algorithm},
                              {"nchannels", c.nchannels}, {"applicable", p.applicable}};
        if (!p.applicable) {
          row["why_not"] = p.why_not;
          rows.push_back(row);
          std::printf("  %s  %-20s %3d %12s   (%s)\n", size_col.c_str(), c.algorithm.c_str(), c.nchannels, "n/a",
                      p.why_not.c_str());
          continue;
        }
        const double us = p.seconds * 1e6;
        const double busbw = hoop::bench::algbw_gbps(l.bytes, us) * factor;
        row["time_us"] = us;
        row["busbw_gbps"] = busbw;
        row["steps"] = p.steps;
        row["picked"] = c.algorithm == pick.algorithm && c.nchannels == pick.nchannels;
        rows.push_back(row);
        std::printf("  %s  %-20s %3d %12.2f %12.3f %8zu %10s %10s %10s\n", size_col.c_str(), c.algorithm.c_str(),
                    c.nchannels, us, busbw, p.steps, human_bytes(static_cast<double>(p.max_rank_bytes_sent)).c_str(),
                    human_bytes(static_cast<double>(p.max_link_bytes)).c_str(),
                    human_bytes(static_cast<double>(p.max_host_tcp_bytes)).c_str());
      }
      if (pick.algorithm.empty()) {
        std::printf("  %25s  -> no applicable algorithm\n", "");
      } else {
        std::printf("  %25s  -> pick %s (%d channel%s), %.2f us\n", "", pick.algorithm.c_str(), pick.nchannels,
                    pick.nchannels == 1 ? "" : "s", pick.predicted_seconds * 1e6);
      }
    }
    // The plot is drawn from the JSON: to a file of its own when --json names none.
    const std::string json_file = !a.json_file.empty() ? a.json_file
                                  : a.plot_file.empty() ? std::string()
                                                        : a.plot_file + ".json";
    if (!json_file.empty()) {
      std::ofstream out(json_file);
      out << nlohmann::json{{"tool", "hoop-sim"}, {"collective", a.collective}, {"ranks", a.ranks},
                            {"hosts", topo.nhosts()}, {"dtype", a.dtype_text}, {"rows", rows}}
                 .dump(1)
          << "\n";
      if (!out) {
        std::fprintf(stderr, "hoop-sim: cannot write %s\n", json_file.c_str());
        return 1;
      }
    }
    if (!a.plot_file.empty()) {
      const bool drawn = write_plot(json_file, a.plot_file);
      if (a.json_file.empty()) std::remove(json_file.c_str());
      if (!drawn) {
        std::fprintf(stderr, "hoop-sim: cannot draw %s (/usr/bin/python3 with matplotlib)\n", a.plot_file.c_str());
        return 1;
      }
    }
    return 0;
  } catch (const hoop::Error& e) {
    std::fprintf(stderr, "hoop-sim: %s\n", e.what());
    return 1;
  }
}
