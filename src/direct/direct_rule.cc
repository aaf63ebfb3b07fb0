#include "direct/direct_rule.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>

#include "core/params.h"
#include "direct/direct_layout.h"

namespace hoop::direct {

namespace {

Tunables from_env(int nranks) {
  Tunables t{};
  t.cell_bytes = round_up(std::max<uint64_t>(params::bytes(params::Id::direct_cell_bytes), kPage), kPage);
  t.small_bytes = std::min<size_t>(params::bytes(params::Id::direct_small_bytes), t.cell_bytes);
  t.chunk_bytes = round_up(std::max<uint64_t>(params::bytes(params::Id::direct_chunk_bytes), kPage), kPage);
  t.stages = static_cast<size_t>(params::integer(params::Id::direct_stages));
  t.single_copy_bytes = params::bytes(params::Id::direct_single_copy_bytes);
  t.single_copy_allreduce_bytes = params::bytes(params::Id::direct_single_copy_allreduce_bytes);
  const auto n = static_cast<uint64_t>(std::max(nranks, 1));
  t.single_copy_alltoall_bytes = params::bytes(params::Id::direct_single_copy_alltoall_bytes) * n * n;
  t.single_copy_part_bytes =
      round_up(std::max<uint64_t>(params::bytes(params::Id::direct_single_copy_part_bytes), kLine), kLine);
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

namespace {

// The real uid on the "Uid:" line of /proc/<pid>/status; -1 when unreadable.
long real_uid_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Uid:", 0) == 0) {
      std::istringstream fields(line.substr(4));
      long uid = -1;
      fields >> uid;
      return uid;
    }
  }
  return -1;
}

}  // namespace

bool single_copy_possible(const std::vector<pid_t>& pids) {
  // Yama's ptrace_scope 1-3 limit process_vm_readv to ancestors (or nobody): the ranks are
  // siblings. Without Yama the classic rule applies: same user.
  std::ifstream yama("/proc/sys/kernel/yama/ptrace_scope");
  int scope = 0;
  if (yama && (yama >> scope) && scope != 0) return false;
  long uid = -2;
  for (pid_t pid : pids) {
    const long u = real_uid_of(pid);
    if (u < 0 || (uid != -2 && u != uid)) return false;
    uid = u;
  }
  return true;
}

}  // namespace hoop::direct
