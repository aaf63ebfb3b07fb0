#include "direct/direct_rule.h"

#include <algorithm>
#include <map>
#include <mutex>

#include "core/env.h"
#include "direct/direct_layout.h"

namespace hoop::direct {

bool supports(OpType op) {
  switch (op) {
    case OpType::allreduce:
    case OpType::reducescatter:
    case OpType::allgather:
    case OpType::broadcast:
    case OpType::reduce:
    case OpType::barrier:
      return true;
    default:
      return false;
  }
}

namespace {

Tunables from_env(int nranks) {
  (void)nranks;
  Tunables t{};
  t.cell_bytes = round_up(std::max<uint64_t>(env::get_size("HOOP_DIRECT_CELL_BYTES").value_or(64 << 10), kPage), kPage);
  t.small_bytes = std::min<size_t>(env::get_size("HOOP_DIRECT_SMALL_BYTES").value_or(16 << 10), t.cell_bytes);
  t.chunk_bytes = round_up(std::max<uint64_t>(env::get_size("HOOP_DIRECT_CHUNK_BYTES").value_or(512 << 10), kPage), kPage);
  t.stages = static_cast<size_t>(std::clamp<int64_t>(env::get_int("HOOP_DIRECT_STAGES").value_or(2), 1, 16));
  return t;
}

}  // namespace

const Tunables& tunables(int nranks) {
  static std::mutex mu;
  static std::map<int, Tunables> cache;
  std::lock_guard lk(mu);
  auto it = cache.find(nranks);
  if (it == cache.end()) it = cache.emplace(nranks, from_env(nranks)).first;
  return it->second;
}

}  // namespace hoop::direct
