// Surviving a dead rank (DpConfig::redundancy = 1): commits, in-memory copies of the ring
// successor's states, and the recovery that re-shards the last commit over the survivors.
//
// Each commit every rank writes its image (dp/state_image.h) and sends it to its ring
// predecessor, which keeps it beside its own: every shard then lives on two ranks. The members
// agree (Communicator::agree) that the step went well everywhere before the new images replace
// the last commit's, so that the last commit is one step on every rank. When the agreement
// fails, the survivors shrink the communicator; each contributes the last commit's image of its
// own and, where its successor is dead, of the successor; an AllGatherv gives every survivor
// every old rank's image, from which a DataParallel over the new rank count loads its shard as
// it would from a checkpoint (no disk read).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "core/errors.h"
#include "core/log.h"
#include "dp/data_parallel_impl.h"

namespace hoop::dp {

namespace detail {

void DataParallelImpl::prepare_commit() {
  const ImageLayout shape = image_layout(nranks_);
  if (next_own_.empty()) {
    next_own_ = TrackedBuffer(ledger_, MemKind::redundancy, shape.elements(rank_) * sizeof(float));
  }
  write_image(next_own_.as<float>());
  if (!comm_ || nranks_ == 1) return;
  const int successor = (rank_ + 1) % nranks_, predecessor = (rank_ + nranks_ - 1) % nranks_;
  const size_t theirs = shape.elements(successor);
  if (next_successor_.empty()) {
    next_successor_ = TrackedBuffer(ledger_, MemKind::redundancy, theirs * sizeof(float));
  }
  // Both directions at once: every rank sends to its predecessor while it receives from its
  // successor, around the ring.
  GroupScope group(*comm_);
  comm_->send_async(next_own_.data(), shape.elements(rank_), DataType::f32, predecessor, cfg_.op_options);
  comm_->recv_async(next_successor_.data(), theirs, DataType::f32, successor, cfg_.op_options);
  group.end();
}

void DataParallelImpl::promote_commit() {
  std::swap(committed_own_, next_own_);
  std::swap(committed_successor_, next_successor_);
  committed_step_ = steps_;
}

}  // namespace detail

namespace {

std::vector<int> ranks_of(const std::vector<bool>& alive, bool want) {
  std::vector<int> out;
  for (size_t r = 0; r < alive.size(); ++r) {
    if (alive[r] == want) out.push_back(static_cast<int>(r));
  }
  return out;
}

}  // namespace

bool DataParallel::commit(bool ok) {
  detail::DataParallelImpl& d = *impl_;
  const ErrorContext ctx{d.rank_, "dp.commit", 0, -1};
  HOOP_CHECK_ARG(d.cfg_.redundancy == 1, ctx, "commit() needs DpConfig::redundancy = 1 (it is {})",
                 d.cfg_.redundancy);
  HOOP_CHECK_ARG(d.finalized_, ctx, "call finalize() first");
  if (!d.comm_) {
    if (ok) {
      d.prepare_commit();
      d.promote_commit();
    }
    return ok;
  }
  std::shared_ptr<Communicator> comm = d.comm_;
  std::string why = "a member failed during the step";
  if (ok) {
    try {
      d.prepare_commit();
    } catch (const Error& e) {
      ok = false;
      why = e.what();
    }
  }
  // A member that failed ends the communicator for the others, which may be waiting on it.
  if (!ok) comm->revoke(fmt::format("rank {} cannot commit step {}: {}", d.rank_, d.steps_, why));
  const auto start = std::chrono::steady_clock::now();
  const Agreement a = comm->agree(ok);
  const int old_rank = d.rank_;
  if (a.value && a.failed_ranks.empty()) {
    d.promote_commit();
    try {
      // Newcomers waiting to join (a replaced rank): rank 0 counts them, the members grow.
      int64_t waiting = d.rank_ == 0 ? comm->waiting_newcomers() : 0;
      comm->broadcast(&waiting, &waiting, 1, DataType::i64, 0);
      if (waiting > 0) {
        const int old_n = d.nranks_;
        recover(comm->grow(static_cast<int>(waiting)));  // replaces impl_
        HOOP_WARN("rank {}: {} rank(s) joined after step {}: {} ranks, from {}", impl_->rank_, waiting,
                  impl_->committed_step_, impl_->nranks_, old_n);
      }
      return true;
    } catch (const Error& e) {
      // A member died after the agreement: the commit stands on every member (they all
      // promoted), and the survivors go on from it. Some may have finished this call (a
      // Broadcast's root never waits) and fail only in the next step, whose commit agrees
      // before it shrinks: this member takes part in that agreement too, or the two sides
      // would wait for each other in different ones until the timeout.
      comm->revoke(fmt::format("rank {} lost a member after step {} was committed: {}", old_rank,
                               d.committed_step_, e.what()));
      comm->agree(false);
    }
  }
  recover(comm->shrink());  // replaces impl_: `d` is gone (the last commit's states are restored)
  impl_->last_recovery_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  HOOP_WARN("rank {} (now rank {} of {}): step {} is redone from the last commit after {:.3f} s of recovery",
            old_rank, impl_->rank_, impl_->nranks_, impl_->committed_step_ + 1, impl_->last_recovery_seconds_);
  return false;
}

void DataParallel::recover(std::shared_ptr<Communicator> next) {
  detail::DataParallelImpl& old = *impl_;
  // A newcomer (join()) holds no image and no old rank: it takes part with -1s.
  const bool newcomer = !old.finalized_;
  const int64_t mine[3] = {newcomer ? -1 : old.rank_, newcomer ? -1 : static_cast<int64_t>(old.committed_step_),
                           newcomer ? -1 : old.nranks_};
  const ErrorContext ctx{next->rank(), "dp.recover", 0, -1};

  // Who brings which old rank's states, and at which commit.
  std::vector<int64_t> all(3 * static_cast<size_t>(next->size()));
  next->allgather(mine, all.data(), 3, DataType::i64);
  const auto field = [&](int q, int f) { return all[3 * static_cast<size_t>(q) + static_cast<size_t>(f)]; };
  int64_t n_old = -1, step = -1;
  for (int q = 0; q < next->size(); ++q) {
    if (field(q, 0) < 0) continue;
    if (n_old < 0) {
      n_old = field(q, 2);
      step = field(q, 1);
    }
    if (field(q, 1) != step || field(q, 2) != n_old) {
      throw_error(ErrorCode::internal,
                  fmt::format("the members disagree on the last commit (step {} of {} ranks, and step {} of {} "
                              "ranks on old rank {})",
                              step, n_old, field(q, 1), field(q, 2), field(q, 0)),
                  ctx);
    }
  }
  HOOP_CHECK_ARG(n_old > 0, ctx, "no member of the communicator holds the model's states");
  std::vector<bool> alive(static_cast<size_t>(n_old), false);
  for (int q = 0; q < next->size(); ++q) {
    if (field(q, 0) >= 0) alive[static_cast<size_t>(field(q, 0))] = true;
  }
  const std::vector<int> dead = ranks_of(alive, false);
  for (int d : dead) {
    const int holder = static_cast<int>((d + n_old - 1) % n_old);
    if (!alive[static_cast<size_t>(holder)] || holder == d) {
      throw_error(ErrorCode::peer_failure,
                  fmt::format("the shard of rank {} is lost: ranks {} and {} (which held its copy) both failed "
                              "(dead: {}; redundancy 1 keeps one copy)",
                              d, d, holder, fmt::join(dead, ", ")),
                  ctx);
    }
  }

  // Every old rank's image, from its owner or from the copy its predecessor holds.
  const int old_n = static_cast<int>(n_old);
  const ImageLayout shape = old.image_layout(old_n);
  std::vector<size_t> counts(static_cast<size_t>(next->size()), 0), displs(counts.size(), 0);
  std::vector<int> order;  // old ranks, in the order their images arrive
  for (int q = 0; q < next->size(); ++q) {
    if (field(q, 0) < 0) continue;
    const int r = static_cast<int>(field(q, 0));
    const int successor = (r + 1) % old_n;
    counts[static_cast<size_t>(q)] = shape.elements(r);
    order.push_back(r);
    if (!alive[static_cast<size_t>(successor)]) {
      counts[static_cast<size_t>(q)] += shape.elements(successor);
      order.push_back(successor);
    }
  }
  size_t total = 0;
  for (size_t q = 0; q < counts.size(); ++q) {
    displs[q] = total;
    total += counts[q];
  }
  std::vector<float> send;
  if (!newcomer) {
    send.assign(old.committed_own_.as<float>(), old.committed_own_.as<float>() + shape.elements(old.rank_));
    const int my_successor = (old.rank_ + 1) % old_n;
    if (!alive[static_cast<size_t>(my_successor)]) {
      const float* copy = old.committed_successor_.as<float>();
      send.insert(send.end(), copy, copy + shape.elements(my_successor));
    }
  }
  std::vector<float> gathered(total);
  next->allgatherv(send.data(), gathered.data(), counts, displs, DataType::f32);
  std::vector<std::vector<float>> images(static_cast<size_t>(old_n));
  size_t at = 0;
  for (int r : order) {
    const size_t e = shape.elements(r);
    images[static_cast<size_t>(r)].assign(gathered.begin() + static_cast<std::ptrdiff_t>(at),
                                          gathered.begin() + static_cast<std::ptrdiff_t>(at + e));
    at += e;
  }
  MemoryStateSource source(shape, std::move(images));

  // The same model over the new communicator, loaded from the images.
  auto fresh = std::make_unique<detail::DataParallelImpl>(next, old.cfg_);
  if (old.hook_ && old.cfg_.compress == "none") fresh->register_comm_hook(old.hook_);
  std::vector<float> full;
  for (size_t t = 0; t < old.layout_.tensors.size(); ++t) {
    const TensorSlot& s = old.layout_.tensors[t];
    full.assign(s.numel, 0.0f);
    source.read(t, 0, 0, s.numel, full.data());
    fresh->register_param(s.name, s.shape, s.layer, full.data());
  }
  fresh->finalize();
  fresh->load_states(source);
  fresh->steps_ = static_cast<uint64_t>(step);
  fresh->prepare_commit();
  fresh->promote_commit();
  HOOP_INFO("rank {}: restored step {} of {} ranks over {} ranks (dead: {})", fresh->rank_, step, old_n,
            fresh->nranks_, fmt::join(dead, ", "));
  impl_ = std::move(fresh);
}

void DataParallel::join_group() {
  const ErrorContext ctx{impl_->rank_, "dp.join_group", 0, -1};
  HOOP_CHECK_ARG(!impl_->finalized_, ctx, "join_group() instead of finalize(), not after it");
  HOOP_CHECK_ARG(impl_->cfg_.redundancy == 1 && impl_->comm_, ctx,
                 "join_group() needs a communicator from Communicator::join and DpConfig::redundancy = 1");
  recover(impl_->comm_);
}

std::shared_ptr<Communicator> DataParallel::communicator() const { return impl_->comm_; }
double DataParallel::last_recovery_seconds() const { return impl_->last_recovery_seconds_; }

}  // namespace hoop::dp
