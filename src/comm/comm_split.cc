// Communicator::split: the members gather every rank's (color, key) with an AllGather on the
// parent, then each builds its CommImpl.
#include "comm/comm_impl.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "core/errors.h"
#include "core/hash.h"

namespace hoop::detail {

std::shared_ptr<Communicator> CommImpl::split(int color, int key) {
  uint64_t n;
  {
    std::lock_guard lk(mu_);
    n = ++split_count_;
  }
  // Every member's (color, key), gathered over the parent's own links in its issue order: no
  // store request, so a split costs each rank O(1) requests whatever N is.
  const std::array<int32_t, 2> mine = {color, key};
  std::vector<int32_t> all(2 * static_cast<size_t>(size()));
  OpTask gather;
  gather.desc.op = OpType::allgather;
  gather.desc.count = mine.size();
  gather.desc.nranks = size();
  gather.desc.root = -1;
  gather.dtype = DataType::i32;
  gather.send = mine.data();
  gather.recv = all.data();
  submit(std::move(gather), true);
  struct Member {
    int key, rank;
  };
  std::vector<Member> members;
  for (int r = 0; r < size(); ++r) {
    const int c = all[2 * static_cast<size_t>(r)], k = all[2 * static_cast<size_t>(r) + 1];
    if (color >= 0 && c == color) members.push_back({k, r});
  }
  if (color < 0) return nullptr;
  std::sort(members.begin(), members.end(),
            [](const Member& a, const Member& b) { return a.key != b.key ? a.key < b.key : a.rank < b.rank; });
  std::vector<PeerInfo> peers;
  int new_rank = -1;
  for (const auto& m : members) {
    if (m.rank == rank_) new_rank = static_cast<int>(peers.size());
    peers.push_back(peers_[static_cast<size_t>(m.rank)]);
  }
  const uint64_t id = fnv1a64(fmt::format("{:x}/{}/{}", comm_id_, n, color)) | 1;
  CommOptions opts;
  opts.timeout = timeout();
  opts.transport = transport_mode_;
  return std::make_shared<Communicator>(
      std::make_unique<CommImpl>(job_, id, new_rank, std::move(peers), opts));
}

}  // namespace hoop::detail
