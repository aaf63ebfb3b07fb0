// The arithmetic of hoop-bench, kept header-only so the unit tests can include it: byte sizes
// with suffixes, the sequence of sizes, how a size maps to the counts of each collective (and
// to the blocks of each rank), the bandwidth formulas and the statistics of the timings.
#pragma once

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/op_traits.h"
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

// The collectives hoop-bench measures: every one but the barrier.
inline bool is_benchmarked(OpType c) { return c != OpType::barrier && !is_point_to_point(c); }
// The collectives whose size S is split into one block per rank.
inline bool splits_among_ranks(OpType c) {
  return c != OpType::allreduce && c != OpType::broadcast && c != OpType::reduce;
}

// --uneven: `total` elements split deterministically and unevenly over `nranks` blocks, block k
// in proportion to k % 3, so ranks 0, 3, 6... get none and the others 1 or 2 shares (rounded:
// cumulative shares are rounded down). One rank alone gets everything.
inline std::vector<size_t> uneven_split(size_t total, int nranks) {
  const size_t n = static_cast<size_t>(nranks < 1 ? 1 : nranks);
  std::vector<size_t> blocks(n, 0);
  size_t weight = 0;
  for (size_t k = 0; k < n; ++k) weight += k % 3;
  if (weight == 0) {
    blocks[0] = total;
    return blocks;
  }
  // floor(total * shares / weight), without overflowing.
  auto elements_for = [&](size_t shares) {
    return total / weight * shares + total % weight * shares / weight;
  };
  size_t shares = 0;  // of the blocks before k
  for (size_t k = 0; k < n; ++k) {
    blocks[k] = elements_for(shares + k % 3) - elements_for(shares);
    shares += k % 3;
  }
  return blocks;
}

// Where each block starts when blocks are packed in rank order.
inline std::vector<size_t> displacements(const std::vector<size_t>& blocks) {
  std::vector<size_t> displs(blocks.size(), 0);
  for (size_t k = 1; k < blocks.size(); ++k) displs[k] = displs[k - 1] + blocks[k - 1];
  return displs;
}

// AllToAll(v): the elements rank `from` sends to rank `to`, blocks[(to - from) mod N]. Every
// rank sends and receives the sum of the blocks (S), yet the pairs differ (and some are empty).
inline size_t pair_count(const std::vector<size_t>& blocks, int from, int to) {
  const int n = static_cast<int>(blocks.size());
  return blocks[static_cast<size_t>(((to - from) % n + n) % n)];
}

// What one row of the table runs, derived from its size as nccl-tests does: the size S is the
// per-rank buffer the bandwidth counts, i.e. the whole buffer of AllReduce, Broadcast and
// Reduce, the (total) send buffer of ReduceScatter, Scatter and AllToAll (what each rank sends
// in all) and the (total) recv buffer of AllGather and Gather (the root's); the v-forms like
// their even forms. Counts are rounded down so that they divide among the ranks, except for
// the uneven split of the v-forms (--uneven).
struct Layout {
  uint64_t bytes = 0;     // S: the bytes the bandwidth counts, after rounding
  size_t count = 0;       // elements of S
  size_t op_count = 0;    // the count argument of the call; the largest block where S is split
  size_t send_count = 0;  // elements of the send buffer (the largest over ranks)
  size_t recv_count = 0;  // elements of the recv buffer (the largest over ranks)
  std::vector<size_t> blocks;  // where S is split among ranks: rank j's block (else empty)
};

inline Layout layout_for(OpType c, uint64_t bytes, size_t elem_size, int nranks,
                         bool uneven = false) {
  Layout l;
  const size_t n = static_cast<size_t>(nranks < 1 ? 1 : nranks);
  const size_t elems = static_cast<size_t>(bytes / elem_size);
  if (!splits_among_ranks(c)) {  // allreduce, broadcast, reduce
    l.count = l.op_count = l.send_count = l.recv_count = elems;
  } else {
    if (uneven && is_vector_op(c)) {
      l.count = elems;
      l.blocks = uneven_split(elems, nranks);
    } else {
      l.count = elems / n * n;
      l.blocks.assign(n, l.count / n);
    }
    l.op_count = *std::max_element(l.blocks.begin(), l.blocks.end());
    l.send_count = sends_block_per_rank(c) ? l.count : l.op_count;
    l.recv_count = receives_block_per_rank(c) ? l.count : l.op_count;
  }
  l.bytes = static_cast<uint64_t>(l.count) * elem_size;
  return l;
}

// The layouts of a run; sizes that round to the same count as the previous row are dropped.
inline std::vector<Layout> plan_layouts(const std::vector<uint64_t>& sizes, OpType c,
                                        size_t elem_size, int nranks, bool uneven = false) {
  std::vector<Layout> rows;
  for (uint64_t size : sizes) {
    Layout l = layout_for(c, size, elem_size, nranks, uneven);
    if (!rows.empty() && rows.back().count == l.count) continue;
    rows.push_back(std::move(l));
  }
  return rows;
}

// busbw = algbw * factor: the bandwidth a rank's busiest link must carry, comparable with the
// hardware's peak whatever N is (the nccl-tests convention).
inline double busbw_factor(OpType c, int nranks) {
  const double n = nranks < 1 ? 1.0 : static_cast<double>(nranks);
  if (c == OpType::allreduce) return 2.0 * (n - 1.0) / n;
  if (c == OpType::broadcast || c == OpType::reduce) return 1.0;
  return (n - 1.0) / n;  // the collectives that split S among ranks
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

// A row's times over its iterations (--stats: min, max and the sample standard deviation
// beside the median; one sample has no spread).
struct TimeStats {
  double median = 0;
  double min = 0;
  double max = 0;
  double stddev = 0;
};

inline TimeStats time_stats(const std::vector<double>& values) {
  TimeStats t;
  if (values.empty()) return t;
  t.median = median(values);
  const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
  t.min = *lo;
  t.max = *hi;
  if (values.size() < 2) return t;
  double mean = 0;
  for (double v : values) mean += v;
  mean /= static_cast<double>(values.size());
  double squares = 0;
  for (double v : values) squares += (v - mean) * (v - mean);
  t.stddev = std::sqrt(squares / static_cast<double>(values.size() - 1));
  return t;
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
