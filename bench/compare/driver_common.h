// What the comparison drivers (MPI, Gloo) share with hoop-bench so that the three measure the
// same thing: sizes as hoop-bench counts them (the whole buffer of allreduce, broadcast and reduce,
// the send buffer of reducescatter and alltoall, the recv buffer of allgather), f32 data, one
// verified call, then warm-up iterations, a barrier, and timed iterations each timed on its own; an
// iteration's time is the slowest rank's, and a row reports the median over iterations.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace compare {

struct DriverArgs {
  std::string op = "allreduce";       // allreduce | reducescatter | allgather | broadcast | reduce |
                                      // alltoall
  std::vector<size_t> sizes;          // bytes, as hoop-bench counts them
  int iters = 20;
  int warmup = 5;
  std::vector<std::string> algos;     // library-specific; empty: the driver's default
  std::string csv_path;               // rank 0 writes its rows here
  std::string store_dir;              // Gloo: rendezvous directory
  std::string iface;                  // Gloo: bind to this interface (default 127.0.0.1)
};

inline std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(sep, start);
    if (end == std::string::npos) end = text.size();
    if (end > start) parts.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

// --op OP --sizes 1024,4096 --iters N --warmup W --algos a,b --csv FILE --store DIR --iface NAME
inline DriverArgs parse_args(int argc, char** argv) {
  DriverArgs a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) throw std::invalid_argument("missing value after " + flag);
    const std::string value = argv[++i];
    if (flag == "--op") a.op = value;
    else if (flag == "--sizes") for (auto& s : split(value, ',')) a.sizes.push_back(std::stoull(s));
    else if (flag == "--iters") a.iters = std::stoi(value);
    else if (flag == "--warmup") a.warmup = std::stoi(value);
    else if (flag == "--algos") a.algos = split(value, ',');
    else if (flag == "--csv") a.csv_path = value;
    else if (flag == "--store") a.store_dir = value;
    else if (flag == "--iface") a.iface = value;
    else throw std::invalid_argument("unknown flag " + flag);
  }
  if (a.sizes.empty()) throw std::invalid_argument("--sizes is required");
  if (a.op != "allreduce" && a.op != "reducescatter" && a.op != "allgather" && a.op != "broadcast" &&
      a.op != "reduce" && a.op != "alltoall")
    throw std::invalid_argument("unknown --op " + a.op);
  if (a.iters < 1 || a.warmup < 0) throw std::invalid_argument("bad --iters/--warmup");
  return a;
}

// Element counts of one row, as hoop-bench's layout_for computes them for f32.
struct Layout {
  size_t count = 0;     // elements the bandwidth counts
  size_t op_count = 0;  // per-rank block of reducescatter / allgather / alltoall, else count
  size_t bytes() const { return count * sizeof(float); }
};

inline bool splits_among_ranks(const std::string& op) {
  return op == "reducescatter" || op == "allgather" || op == "alltoall";
}

inline Layout layout_for(const std::string& op, size_t bytes, int nranks) {
  const size_t n = static_cast<size_t>(nranks);
  const size_t elems = bytes / sizeof(float);
  Layout l;
  if (splits_among_ranks(op)) {
    l.count = elems / n * n;
    l.op_count = l.count / n;
  } else {
    l.count = elems;
    l.op_count = elems;
  }
  return l;
}

inline double busbw_factor(const std::string& op, int nranks) {
  const double n = nranks;
  if (op == "allreduce") return 2.0 * (n - 1.0) / n;
  if (splits_among_ranks(op)) return (n - 1.0) / n;
  return 1.0;  // broadcast, reduce
}

// Where `rank`'s recv buffer holds the sum over all ranks after an AllReduce, ReduceScatter or
// Reduce (to rank 0): elements [0, len), the sums of the input's elements from `first` on. A
// Reduce defines only the root's output (Gloo's uses the others' as scratch): none elsewhere.
struct ReducedRange {
  size_t first = 0;
  size_t len = 0;
};

inline bool reduces(const std::string& op) {
  return op == "allreduce" || op == "reducescatter" || op == "reduce";
}

inline ReducedRange reduced_range(const std::string& op, const Layout& l, int rank) {
  if (op == "reducescatter") return {static_cast<size_t>(rank) * l.op_count, l.op_count};
  if (op == "reduce" && rank != 0) return {0, 0};
  return {0, l.count};
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2.0;
}

// Inputs whose f32 sum over any number of ranks up to 64 is exact: small integers.
inline float input_value(int rank, size_t i) { return static_cast<float>((rank + 1) + (i % 7)); }
inline float sum_value(int nranks, size_t i) {
  return static_cast<float>(nranks * (nranks + 1) / 2 + nranks * static_cast<int>(i % 7));
}
// Element i of `rank`'s recv buffer after an AllGather / AllToAll of `block` elements per rank:
// block s came from rank s, out of its input's block 0 (AllGather) or block `rank` (AllToAll).
inline float allgather_value(size_t block, size_t i) {
  return input_value(static_cast<int>(i / block), i % block);
}
inline float alltoall_value(int rank, size_t block, size_t i) {
  return input_value(static_cast<int>(i / block), static_cast<size_t>(rank) * block + i % block);
}

inline std::vector<float> make_buffer(size_t count) {
  std::vector<float> v(std::max<size_t>(count, 1));
  std::memset(v.data(), 0, v.size() * sizeof(float));  // fault the pages in before timing
  return v;
}

class CsvOut {
 public:
  explicit CsvOut(const std::string& path) {
    if (path.empty()) return;
    f_ = std::fopen(path.c_str(), "w");
    if (!f_) throw std::runtime_error("cannot write " + path);
    std::fputs("lib,op,algo,nranks,size_bytes,count,time_us,algbw_gbps,busbw_gbps,iters,warmup,wrong\n", f_);
  }
  ~CsvOut() {
    if (f_) std::fclose(f_);
  }
  CsvOut(const CsvOut&) = delete;
  CsvOut& operator=(const CsvOut&) = delete;

  void row(const char* lib, const DriverArgs& a, const std::string& algo, int nranks,
           const Layout& l, double time_us, unsigned long long wrong) {
    const double algbw = time_us > 0 ? static_cast<double>(l.bytes()) / (time_us * 1e3) : 0.0;
    const double busbw = algbw * busbw_factor(a.op, nranks);
    std::printf("%-6s %-13s %-17s %2d %12zu %12.2f %8.3f %8.3f %llu\n", lib, a.op.c_str(),
                algo.c_str(), nranks, l.bytes(), time_us, algbw, busbw, wrong);
    std::fflush(stdout);
    if (!f_) return;
    std::fprintf(f_, "%s,%s,%s,%d,%zu,%zu,%.3f,%.6f,%.6f,%d,%d,%llu\n", lib, a.op.c_str(),
                 algo.c_str(), nranks, l.bytes(), l.count, time_us, algbw, busbw, a.iters,
                 a.warmup, wrong);
    std::fflush(f_);
  }

 private:
  std::FILE* f_ = nullptr;
};

using Clock = std::chrono::steady_clock;

// Times `iters` calls of fn, each on its own, in microseconds.
template <typename Fn>
std::vector<double> time_calls(int iters, Fn&& fn) {
  std::vector<double> times;
  times.reserve(static_cast<size_t>(iters));
  for (int i = 0; i < iters; ++i) {
    const auto t0 = Clock::now();
    fn();
    times.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  return times;
}

}  // namespace compare
