// Communicator::shrink and ::agree (MPI ULFM's MPIX_Comm_shrink and MPIX_Comm_agree, NCCL's
// ncclCommShrink): the live members settle on who is there through the store (survivors.h),
// never through the links a failure may have broken, so both work on a failed or revoked
// communicator.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "comm/comm_impl.h"
#include "comm/survivors.h"
#include "core/hash.h"
#include "core/log.h"

namespace hoop::detail {

namespace {

// The members not in `list`, in increasing order.
std::vector<int> missing_from(const std::vector<Survivor>& list, int nranks) {
  std::vector<int> out;
  size_t i = 0;
  for (int r = 0; r < nranks; ++r) {
    if (i < list.size() && list[i].rank == r) {
      ++i;
    } else {
      out.push_back(r);
    }
  }
  return out;
}

}  // namespace

SurvivorQuery CommImpl::survivor_query(const char* op, uint64_t n) {
  SurvivorQuery q;
  q.store = job_->store.get();
  q.prefix = fmt::format("hoop/c{:x}/{}{}", comm_id_, op, n);  // hoop/c<id>/shrink1, .../agree1
  q.rank = rank_;
  q.nranks = size();
  q.timeout = timeout();
  q.dead = [this] { return dead_members(); };
  q.op = op;
  return q;
}

std::shared_ptr<Communicator> CommImpl::shrink() {
  uint64_t n;
  {
    std::lock_guard lk(mu_);
    n = ++shrink_count_;
  }
  const std::vector<Survivor> list = settle_survivors(survivor_query("shrink", n), "");
  const std::vector<int> gone = missing_from(list, size());

  std::vector<PeerInfo> peers;
  int new_rank = -1;
  for (const auto& s : list) {
    if (s.rank == rank_) new_rank = static_cast<int>(peers.size());
    peers.push_back(peers_[static_cast<size_t>(s.rank)]);
  }
  HOOP_INFO("rank {}: shrink #{} keeps {} of {} ranks (gone: {}); this rank is now rank {}", rank_, n,
            list.size(), size(), fmt::join(gone, ", "), new_rank);
  const uint64_t id = fnv1a64(fmt::format("{:x}/shrink/{}", comm_id_, n)) | 1;
  CommOptions opts;
  opts.timeout = timeout();
  opts.transport = transport_mode_;
  return std::make_shared<Communicator>(std::make_unique<CommImpl>(job_, id, new_rank, std::move(peers), opts));
}

Agreement CommImpl::agree(bool value) {
  uint64_t n;
  {
    std::lock_guard lk(mu_);
    n = ++agree_count_;
  }
  const std::vector<Survivor> list = settle_survivors(survivor_query("agree", n), value ? "1" : "0");
  Agreement a;
  a.value = std::all_of(list.begin(), list.end(), [](const Survivor& s) { return s.value == "1"; });
  a.failed_ranks = missing_from(list, size());
  return a;
}

}  // namespace hoop::detail
