// The arithmetic of hoop-bench, kept header-only so the unit tests can include it: byte sizes
// with suffixes, the sequence of sizes, how a size maps to the counts of each collective, the
// bandwidth formulas and the statistics of the timings.
#pragma once

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hoop/types.h"

namespace hoop::bench {

// "4096", "1K", "64M", "1G", "2T" (powers of 1024, any case, an optional trailing "B" or "iB":
// "64MB", "64MiB"). nullopt when malformed, negative, fractional or too large.
inline std::optional<uint64_t> parse_bytes(std::string_view text) {
  size_t i = 0;
  uint64_t value = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    const uint64_t digit = static_cast<uint64_t>(text[i] - '0');
    if (value > (std::numeric_limits<uint64_t>::max() - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
    ++i;
  }
  if (i == 0) return std::nullopt;
  std::string unit;
  for (char ch : text.substr(i)) unit += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  unsigned shift = 0;
  if (!unit.empty() && unit != "b") {
    const std::string_view prefixes = "kmgt";
    const size_t p = prefixes.find(unit[0]);
    if (p == std::string_view::npos) return std::nullopt;
    const std::string_view rest = std::string_view(unit).substr(1);
    if (!rest.empty() && rest != "b" && rest != "ib") return std::nullopt;
    shift = 10 * static_cast<unsigned>(p + 1);
  }
  if (value > (std::numeric_limits<uint64_t>::max() >> shift)) return std::nullopt;
  return value << shift;
}

// How the sizes grow from min_bytes to max_bytes: multiplied by `factor` (when > 1), else
// increased by `step_bytes`.
struct SizeSteps {
  uint64_t min_bytes = 1024;
  uint64_t max_bytes = 32ull << 20;
  uint64_t factor = 2;
  uint64_t step_bytes = 0;
};

// Every size of the run, in increasing order. A zero minimum with a factor is followed by
// 1, factor, factor^2... (a product would stay at zero forever).
inline std::vector<uint64_t> size_sequence(const SizeSteps& s) {
  std::vector<uint64_t> sizes;
  if (s.min_bytes > s.max_bytes || (s.factor <= 1 && s.step_bytes == 0)) return sizes;
  uint64_t size = s.min_bytes;
  while (true) {
    sizes.push_back(size);
    uint64_t next = 0;
    if (s.factor > 1) {
      if (size == 0) {
        next = 1;
      } else if (size > std::numeric_limits<uint64_t>::max() / s.factor) {
        break;
      } else {
        next = size * s.factor;
      }
    } else {
      if (size > std::numeric_limits<uint64_t>::max() - s.step_bytes) break;
      next = size + s.step_bytes;
    }
    if (next > s.max_bytes) break;
    size = next;
  }
  return sizes;
}

// The five collectives hoop-bench measures.
inline bool is_benchmarked(OpType c) {
  return c == OpType::allreduce || c == OpType::reducescatter || c == OpType::allgather ||
         c == OpType::broadcast || c == OpType::reduce;
}
inline bool has_redop(OpType c) {
  return c == OpType::allreduce || c == OpType::reducescatter || c == OpType::reduce;
}
inline bool has_root(OpType c) { return c == OpType::broadcast || c == OpType::reduce; }

// What one row of the table runs, derived from its size as nccl-tests does: the size is the
// per-rank buffer the bandwidth counts, i.e. the whole buffer of AllReduce, Broadcast and
// Reduce, the (total) send buffer of ReduceScatter and the (total) recv buffer of AllGather.
// Counts are rounded down so that they divide among the ranks.
struct Layout {
  uint64_t bytes = 0;     // S: the bytes the bandwidth counts, after rounding
  size_t count = 0;       // elements of S
  size_t op_count = 0;    // the count argument of the call (recvcount / sendcount for RS / AG)
  size_t send_count = 0;  // elements of the send buffer
  size_t recv_count = 0;  // elements of the recv buffer
};

inline Layout layout_for(OpType c, uint64_t bytes, size_t elem_size, int nranks) {
  Layout l;
  const size_t n = static_cast<size_t>(nranks < 1 ? 1 : nranks);
  const size_t elems = static_cast<size_t>(bytes / elem_size);
  switch (c) {
    case OpType::reducescatter:
      l.count = elems / n * n;
      l.op_count = l.count / n;
      l.send_count = l.count;
      l.recv_count = l.op_count;
      break;
    case OpType::allgather:
      l.count = elems / n * n;
      l.op_count = l.count / n;
      l.send_count = l.op_count;
      l.recv_count = l.count;
      break;
    default:  // allreduce, broadcast, reduce
      l.count = elems;
      l.op_count = elems;
      l.send_count = elems;
      l.recv_count = elems;
      break;
  }
  l.bytes = static_cast<uint64_t>(l.count) * elem_size;
  return l;
}

// The layouts of a run; sizes that round to the same count as the previous row are dropped.
inline std::vector<Layout> plan_layouts(const std::vector<uint64_t>& sizes, OpType c,
                                        size_t elem_size, int nranks) {
  std::vector<Layout> rows;
  for (uint64_t size : sizes) {
    Layout l = layout_for(c, size, elem_size, nranks);
    if (!rows.empty() && rows.back().count == l.count) continue;
    rows.push_back(l);
  }
  return rows;
}

// busbw = algbw * factor: the bandwidth a rank's busiest link must carry, comparable with the
// hardware's peak whatever N is (the nccl-tests convention).
inline double busbw_factor(OpType c, int nranks) {
  const double n = nranks < 1 ? 1.0 : static_cast<double>(nranks);
  switch (c) {
    case OpType::allreduce: return 2.0 * (n - 1.0) / n;
    case OpType::reducescatter:
    case OpType::allgather: return (n - 1.0) / n;
    default: return 1.0;  // broadcast, reduce
  }
}

// GB/s (10^9 bytes per second) for `bytes` moved in `time_us` microseconds; 0 for no time.
inline double algbw_gbps(uint64_t bytes, double time_us) {
  if (!(time_us > 0.0)) return 0.0;
  return static_cast<double>(bytes) / (time_us * 1e3);
}

inline double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  const size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid), values.end());
  const double upper = values[mid];
  if (values.size() % 2 == 1) return upper;
  const double lower = *std::max_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid));
  return (lower + upper) / 2.0;
}

// How the ranks' times of one iteration become one time (-a, as in nccl-tests): rank 0's
// own, the mean, the min or the max over ranks (the default: an op is done when the slowest
// rank is done).
enum class RankCombine { rank0 = 0, mean = 1, min = 2, max = 3 };

inline const char* to_string(RankCombine c) {
  switch (c) {
    case RankCombine::rank0: return "rank 0";
    case RankCombine::mean: return "mean over ranks";
    case RankCombine::min: return "min over ranks";
    case RankCombine::max: return "max over ranks";
  }
  return "?";
}

}  // namespace hoop::bench
