#include "comm/region_shape.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <string_view>
#include <utility>

#include <unistd.h>

#include "core/hash.h"
#include "core/params.h"

namespace hoop::detail {

namespace {

constexpr size_t kPage = 4096;
constexpr size_t kLine = 64;
// Zero copy reduces a piece of its part in scratch, then writes it to every output: a piece
// that stays in the core's L2 while it is written N times.
constexpr size_t kZeroCopyPieceBytes = 256 * 1024;

size_t round_up(size_t x, size_t to) { return (x + to - 1) / to * to; }
size_t elements_from(size_t bytes, size_t elem) { return (bytes + elem - 1) / elem; }  // at least `bytes`

// The single-copy defaults were measured on an Intel Xeon, where single copy already won with
// reads of 32 KiB (AllGather of 64 KiB on 2 ranks: 2.3-3x the slots), so they stand for a read
// that pays from 32 KiB (the calibration's own measure of the read was not taken there). On an
// AMD EPYC VM whose read pays from 256-512 KiB, the same defaults made AllGather, ReduceScatter,
// Broadcast and AllToAll of 64-256 KiB 1.3-2x slower than the slots. Where the calibration
// measured the read (CostModel::single_copy_read_bytes), the thresholds left unset move with it.
constexpr size_t kDefaultsRead = 32 * 1024;

bool unset(params::Id id) { return params::origin(id) == params::Origin::default_value; }

DirectTunables from_env(int nranks, size_t single_copy_read_bytes) {
  DirectTunables t{};
  const size_t read_scale = std::max<size_t>(single_copy_read_bytes / kDefaultsRead, 1);
  t.cell_bytes = round_up(std::max<uint64_t>(params::bytes(params::Id::direct_cell_bytes), kPage), kPage);
  t.small_bytes = std::min<size_t>(params::bytes(params::Id::direct_small_bytes), t.cell_bytes);
  t.chunk_bytes = round_up(std::max<uint64_t>(params::bytes(params::Id::direct_chunk_bytes), kPage), kPage);
  t.stages = static_cast<size_t>(params::integer(params::Id::direct_stages));
  t.single_copy_bytes = params::bytes(params::Id::direct_single_copy_bytes);
  if (unset(params::Id::direct_single_copy_bytes)) t.single_copy_bytes *= read_scale;
  t.single_copy_allreduce_bytes = params::bytes(params::Id::direct_single_copy_allreduce_bytes);
  const auto n = static_cast<uint64_t>(std::max(nranks, 1));
  const long cores = ::sysconf(_SC_NPROCESSORS_ONLN);
  t.single_copy_allgather_bytes = single_copy_allgather_bytes(t.single_copy_bytes, nranks, cores);
  t.more_ranks_than_cores = cores > 0 && nranks > cores;
  t.single_copy_alltoall_bytes = params::bytes(params::Id::direct_single_copy_alltoall_bytes) * n * n;
  // AllToAll reads a block of S/N from each peer; where the read pays only from beyond the
  // defaults' 32 KiB, from blocks of a quarter of the measured read. On the EPYC VM above (512
  // KiB): 2 ranks from 256 KiB (single copy at 64 KiB took 2x the slots' time), 4 from 512 KiB
  // (1.25-1.4x faster than the slots there), 8 from 1 MiB (1.2x; scaling N² by the read would
  // wait for 2 MiB, half the read a block for 2 MiB as well).
  if (read_scale > 1 && unset(params::Id::direct_single_copy_alltoall_bytes))
    t.single_copy_alltoall_bytes = std::max<uint64_t>(t.single_copy_alltoall_bytes, single_copy_read_bytes / 4 * n);
  t.single_copy_part_bytes =
      round_up(std::max<uint64_t>(params::bytes(params::Id::direct_single_copy_part_bytes), kLine), kLine);
  t.registered_bytes = params::bytes(params::Id::direct_registered_bytes);
  t.stream_bytes = params::bytes(params::Id::direct_stream_bytes);
  return t;
}

}  // namespace

size_t single_copy_allgather_bytes(size_t single_copy_bytes, int nranks, long cores) {
  const auto n = static_cast<size_t>(std::max(nranks, 1));
  if (cores <= 0) return 0;
  const size_t per_core = (n + static_cast<size_t>(cores) - 1) / static_cast<size_t>(cores);
  return per_core > 1 ? single_copy_bytes / 8 * n * per_core : 0;
}

size_t DirectTunables::window_bytes() const { return std::max(cell_bytes, stages * chunk_bytes); }

uint64_t DirectTunables::key() const {
  uint64_t h = fnv1a64("");
  for (size_t v : {cell_bytes, small_bytes, chunk_bytes, stages, single_copy_bytes, single_copy_allreduce_bytes,
                   single_copy_allgather_bytes, single_copy_alltoall_bytes, single_copy_part_bytes, registered_bytes, stream_bytes,
                   size_t{more_ranks_than_cores}}) {
    h = fnv1a64(std::string_view(reinterpret_cast<const char*>(&v), sizeof v), h);
  }
  return h;
}

const DirectTunables& direct_tunables(int nranks, size_t single_copy_read_bytes) {
  static std::mutex mu;
  static std::map<std::pair<int, size_t>, DirectTunables> cache;
  std::lock_guard lk(mu);
  const std::pair key{nranks, single_copy_read_bytes};
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, from_env(nranks, single_copy_read_bytes)).first;
  return it->second;
}

schedule::RegionShape region_shape(const DirectTunables& t, size_t elem_bytes, bool single_copy_possible) {
  const size_t es = std::max<size_t>(elem_bytes, 1);
  schedule::RegionShape s;
  s.cell_elements = t.small_bytes / es;
  s.chunk_elements = std::max<size_t>(t.chunk_bytes / es, 1);
  s.stages = std::max<size_t>(t.stages, 1);
  s.align_elements = std::max<size_t>(kLine / es, 1);
  if (single_copy_possible) {
    s.single_copy_elements = elements_from(t.single_copy_bytes, es);
    s.single_copy_allreduce_elements = elements_from(t.single_copy_allreduce_bytes, es);
    s.single_copy_allgather_elements = elements_from(t.single_copy_allgather_bytes, es);
    s.single_copy_alltoall_elements = elements_from(t.single_copy_alltoall_bytes, es);
    // Mapping a peer's registered buffer takes the same permission as reading its memory.
    s.registered_elements = elements_from(t.registered_bytes, es);
  }
  s.zero_copy_piece_elements = std::max<size_t>(kZeroCopyPieceBytes / es, 1);
  s.stream_elements = elements_from(t.stream_bytes, es);
  s.single_copy_part_elements = std::max<size_t>(t.single_copy_part_bytes / es, 1);
  s.broadcast_cells_done = t.more_ranks_than_cores;
  return s;
}

}  // namespace hoop::detail
