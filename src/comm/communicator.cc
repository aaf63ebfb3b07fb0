// The public Communicator: argument packing; the work happens in CommImpl.
#include "hoop/communicator.h"

#include <cstdint>

#include "comm/comm_impl.h"
#include "comm/p2p_engine.h"
#include "core/op_traits.h"

namespace hoop {

using detail::OpTask;

namespace {

OpTask make_task(OpType op, const void* send, void* recv, size_t count, DataType dt, RedOp redop,
                 int root, const OpOptions& o, int nranks) {
  OpTask t;
  t.desc.op = op;
  t.desc.count = count;
  t.desc.nranks = nranks;
  t.desc.root = root;
  t.desc.redop = redop;
  t.dtype = dt;
  t.send = send;
  t.recv = recv;
  t.opts = o;
  return t;
}

// Whether `inner` is `outer` + elems elements (no pointer arithmetic past the buffers).
bool at_offset(const void* inner, const void* outer, size_t elems, DataType dt) {
  if (!inner || !outer) return false;
  const auto i = reinterpret_cast<uintptr_t>(inner), o = reinterpret_cast<uintptr_t>(outer);
  const size_t es = dtype_size(dt);
  return i >= o && es > 0 && (i - o) % es == 0 && (i - o) / es == elems;
}

// NCCL's in-place conventions; Gather and Scatter (their v-forms too) at the root only.
bool in_place(OpType op, const void* send, const void* recv, size_t count, DataType dt, int rank, int root) {
  if (!send || !recv) return false;
  const size_t block = count * static_cast<size_t>(rank);
  switch (op) {
    case OpType::reducescatter: return at_offset(recv, send, block, dt);
    case OpType::allgather: return at_offset(send, recv, block, dt);
    case OpType::gather: return rank == root && at_offset(send, recv, block, dt);
    case OpType::scatter: return rank == root && at_offset(recv, send, block, dt);
    default: return send == recv;
  }
}

}  // namespace

Communicator::Communicator(std::unique_ptr<detail::CommImpl> impl) : impl_(std::move(impl)) {}
Communicator::~Communicator() = default;

int Communicator::rank() const { return impl_->rank(); }
int Communicator::size() const { return impl_->size(); }
int Communicator::local_rank() const { return impl_->local_rank(); }
int Communicator::local_size() const { return impl_->local_size(); }
const std::string& Communicator::job_id() const { return impl_->job_id(); }

namespace {
Work submit(detail::CommImpl& impl, OpType op, const void* send, void* recv, size_t count, DataType dt,
            RedOp redop, int root, const OpOptions& o, bool blocking) {
  OpTask t = make_task(op, send, recv, count, dt, redop, root, o, impl.size());
  t.desc.in_place = in_place(op, send, recv, count, dt, impl.rank(), root);
  return impl.submit(std::move(t), blocking);
}

using schedule::BlockLayout;
using schedule::Blocks;

// A call's counts and displacements as it gives them; no displacements: packed.
Blocks blocks_of(std::span<const size_t> counts, std::span<const size_t> displs) {
  Blocks b = Blocks::packed({counts.begin(), counts.end()});
  if (!displs.empty()) b.displs.assign(displs.begin(), displs.end());
  return b;
}

size_t sum_of(std::span<const size_t> counts) { return Blocks::packed({counts.begin(), counts.end()}).extent(); }

// A v-form: `count` as CollectiveDesc documents it; in place when `inner` is `outer` plus
// block `in_place_block` of `at` (whose spans CommImpl::validate checks).
Work submit_v(detail::CommImpl& impl, OpType op, const void* send, void* recv, size_t count, DataType dt,
              RedOp redop, int root, std::shared_ptr<const BlockLayout> layout, const Blocks* at,
              bool send_inside, const OpOptions& o, bool blocking) {
  OpTask t = make_task(op, send, recv, count, dt, redop, root, o, impl.size());
  const int j = has_root(op) ? root : impl.rank();  // the v-forms with a root: gatherv, scatterv
  if (at && (op == OpType::allgatherv || op == OpType::reducescatterv || impl.rank() == root) &&
      at->displs.size() > static_cast<size_t>(j)) {
    const size_t displ = at->displ(j);
    t.desc.in_place = send_inside ? at_offset(send, recv, displ, dt) : at_offset(recv, send, displ, dt);
  }
  t.desc.blocks = std::move(layout);
  return impl.submit(std::move(t), blocking);
}

Work alltoallv_call(detail::CommImpl& impl, const void* send, std::span<const size_t> sendcounts,
                    std::span<const size_t> sdispls, void* recv, std::span<const size_t> recvcounts,
                    std::span<const size_t> rdispls, DataType dt, const OpOptions& o, bool blocking) {
  auto layout = std::make_shared<BlockLayout>();
  layout->send = blocks_of(sendcounts, sdispls);
  layout->recv = blocks_of(recvcounts, rdispls);
  return submit_v(impl, OpType::alltoallv, send, recv, sum_of(sendcounts), dt, RedOp::sum, -1, std::move(layout),
                  nullptr, false, o, blocking);
}

Work gatherv_call(detail::CommImpl& impl, const void* send, size_t sendcount, void* recv,
                  std::span<const size_t> recvcounts, std::span<const size_t> displs, DataType dt, int root,
                  const OpOptions& o, bool blocking) {
  auto layout = std::make_shared<BlockLayout>();
  if (impl.rank() == root) layout->recv = blocks_of(recvcounts, displs);  // read on the root only
  const Blocks* at = &layout->recv;
  return submit_v(impl, OpType::gatherv, send, recv, sendcount, dt, RedOp::sum, root, std::move(layout), at, true,
                  o, blocking);
}

Work scatterv_call(detail::CommImpl& impl, const void* send, std::span<const size_t> sendcounts,
                   std::span<const size_t> displs, void* recv, size_t recvcount, DataType dt, int root,
                   const OpOptions& o, bool blocking) {
  auto layout = std::make_shared<BlockLayout>();
  if (impl.rank() == root) layout->send = blocks_of(sendcounts, displs);
  const Blocks* at = &layout->send;
  return submit_v(impl, OpType::scatterv, send, recv, recvcount, dt, RedOp::sum, root, std::move(layout), at, false,
                  o, blocking);
}

Work allgatherv_call(detail::CommImpl& impl, const void* send, void* recv, std::span<const size_t> counts,
                     std::span<const size_t> displs, DataType dt, const OpOptions& o, bool blocking) {
  auto layout = std::make_shared<BlockLayout>();
  layout->recv = blocks_of(counts, displs);
  const Blocks* at = &layout->recv;
  return submit_v(impl, OpType::allgatherv, send, recv, sum_of(counts), dt, RedOp::sum, -1, std::move(layout), at,
                  true, o, blocking);
}

Work reducescatterv_call(detail::CommImpl& impl, const void* send, void* recv, std::span<const size_t> recvcounts,
                         DataType dt, RedOp op, const OpOptions& o, bool blocking) {
  auto layout = std::make_shared<BlockLayout>();
  layout->send = blocks_of(recvcounts, {});
  const Blocks* at = &layout->send;
  return submit_v(impl, OpType::reducescatterv, send, recv, sum_of(recvcounts), dt, op, -1, std::move(layout), at,
                  false, o, blocking);
}
}  // namespace

Work Communicator::allreduce_async(const void* send, void* recv, size_t count, DataType dt, RedOp op,
                                   const OpOptions& o) {
  return submit(*impl_, OpType::allreduce, send, recv, count, dt, op, -1, o, false);
}
Work Communicator::reducescatter_async(const void* send, void* recv, size_t recvcount, DataType dt,
                                       RedOp op, const OpOptions& o) {
  return submit(*impl_, OpType::reducescatter, send, recv, recvcount, dt, op, -1, o, false);
}
Work Communicator::allgather_async(const void* send, void* recv, size_t sendcount, DataType dt,
                                   const OpOptions& o) {
  return submit(*impl_, OpType::allgather, send, recv, sendcount, dt, RedOp::sum, -1, o, false);
}
Work Communicator::broadcast_async(const void* send, void* recv, size_t count, DataType dt, int root,
                                   const OpOptions& o) {
  return submit(*impl_, OpType::broadcast, send, recv, count, dt, RedOp::sum, root, o, false);
}
Work Communicator::reduce_async(const void* send, void* recv, size_t count, DataType dt, RedOp op,
                                int root, const OpOptions& o) {
  return submit(*impl_, OpType::reduce, send, recv, count, dt, op, root, o, false);
}
Work Communicator::barrier_async(const OpOptions& o) {
  return submit(*impl_, OpType::barrier, nullptr, nullptr, 0, DataType::u8, RedOp::sum, -1, o, false);
}
Work Communicator::alltoall_async(const void* send, void* recv, size_t count, DataType dt, const OpOptions& o) {
  return submit(*impl_, OpType::alltoall, send, recv, count, dt, RedOp::sum, -1, o, false);
}
Work Communicator::alltoallv_async(const void* send, std::span<const size_t> sendcounts,
                                   std::span<const size_t> sdispls, void* recv, std::span<const size_t> recvcounts,
                                   std::span<const size_t> rdispls, DataType dt, const OpOptions& o) {
  return alltoallv_call(*impl_, send, sendcounts, sdispls, recv, recvcounts, rdispls, dt, o, false);
}
Work Communicator::gather_async(const void* send, void* recv, size_t count, DataType dt, int root,
                                const OpOptions& o) {
  return submit(*impl_, OpType::gather, send, recv, count, dt, RedOp::sum, root, o, false);
}
Work Communicator::gatherv_async(const void* send, size_t sendcount, void* recv, std::span<const size_t> recvcounts,
                                 std::span<const size_t> displs, DataType dt, int root, const OpOptions& o) {
  return gatherv_call(*impl_, send, sendcount, recv, recvcounts, displs, dt, root, o, false);
}
Work Communicator::scatter_async(const void* send, void* recv, size_t count, DataType dt, int root,
                                 const OpOptions& o) {
  return submit(*impl_, OpType::scatter, send, recv, count, dt, RedOp::sum, root, o, false);
}
Work Communicator::scatterv_async(const void* send, std::span<const size_t> sendcounts,
                                  std::span<const size_t> displs, void* recv, size_t recvcount, DataType dt,
                                  int root, const OpOptions& o) {
  return scatterv_call(*impl_, send, sendcounts, displs, recv, recvcount, dt, root, o, false);
}
Work Communicator::allgatherv_async(const void* send, void* recv, std::span<const size_t> counts,
                                    std::span<const size_t> displs, DataType dt, const OpOptions& o) {
  return allgatherv_call(*impl_, send, recv, counts, displs, dt, o, false);
}
Work Communicator::reducescatterv_async(const void* send, void* recv, std::span<const size_t> recvcounts,
                                        DataType dt, RedOp op, const OpOptions& o) {
  return reducescatterv_call(*impl_, send, recv, recvcounts, dt, op, o, false);
}
namespace {
OpTask p2p_task(OpType op, const void* send, void* recv, size_t count, DataType dt, int peer, int tag,
                const OpOptions& o, int nranks) {
  OpTask t = make_task(op, send, recv, count, dt, RedOp::sum, peer, o, nranks);
  t.tag = tag;
  return t;
}
}  // namespace

Work Communicator::send_async(const void* buf, size_t count, DataType dt, int peer, const OpOptions& o) {
  return send_async(buf, count, dt, peer, 0, o);
}
Work Communicator::send_async(const void* buf, size_t count, DataType dt, int peer, int tag,
                              const OpOptions& o) {
  return impl_->point_to_point_async(p2p_task(OpType::send, buf, nullptr, count, dt, peer, tag, o, size()));
}
Work Communicator::recv_async(void* buf, size_t count, DataType dt, int peer, const OpOptions& o) {
  return recv_async(buf, count, dt, peer, 0, o);
}
Work Communicator::recv_async(void* buf, size_t count, DataType dt, int peer, int tag, const OpOptions& o) {
  return impl_->point_to_point_async(p2p_task(OpType::recv, nullptr, buf, count, dt, peer, tag, o, size()));
}

void Communicator::allreduce(const void* send, void* recv, size_t count, DataType dt, RedOp op,
                             const OpOptions& o) {
  submit(*impl_, OpType::allreduce, send, recv, count, dt, op, -1, o, true);
}
void Communicator::reducescatter(const void* send, void* recv, size_t recvcount, DataType dt, RedOp op,
                                 const OpOptions& o) {
  submit(*impl_, OpType::reducescatter, send, recv, recvcount, dt, op, -1, o, true);
}
void Communicator::allgather(const void* send, void* recv, size_t sendcount, DataType dt,
                             const OpOptions& o) {
  submit(*impl_, OpType::allgather, send, recv, sendcount, dt, RedOp::sum, -1, o, true);
}
void Communicator::broadcast(const void* send, void* recv, size_t count, DataType dt, int root,
                             const OpOptions& o) {
  submit(*impl_, OpType::broadcast, send, recv, count, dt, RedOp::sum, root, o, true);
}
void Communicator::reduce(const void* send, void* recv, size_t count, DataType dt, RedOp op, int root,
                          const OpOptions& o) {
  submit(*impl_, OpType::reduce, send, recv, count, dt, op, root, o, true);
}
void Communicator::barrier(const OpOptions& o) {
  submit(*impl_, OpType::barrier, nullptr, nullptr, 0, DataType::u8, RedOp::sum, -1, o, true);
}
void Communicator::alltoall(const void* send, void* recv, size_t count, DataType dt, const OpOptions& o) {
  submit(*impl_, OpType::alltoall, send, recv, count, dt, RedOp::sum, -1, o, true);
}
void Communicator::alltoallv(const void* send, std::span<const size_t> sendcounts, std::span<const size_t> sdispls,
                             void* recv, std::span<const size_t> recvcounts, std::span<const size_t> rdispls,
                             DataType dt, const OpOptions& o) {
  alltoallv_call(*impl_, send, sendcounts, sdispls, recv, recvcounts, rdispls, dt, o, true);
}
void Communicator::gather(const void* send, void* recv, size_t count, DataType dt, int root, const OpOptions& o) {
  submit(*impl_, OpType::gather, send, recv, count, dt, RedOp::sum, root, o, true);
}
void Communicator::gatherv(const void* send, size_t sendcount, void* recv, std::span<const size_t> recvcounts,
                           std::span<const size_t> displs, DataType dt, int root, const OpOptions& o) {
  gatherv_call(*impl_, send, sendcount, recv, recvcounts, displs, dt, root, o, true);
}
void Communicator::scatter(const void* send, void* recv, size_t count, DataType dt, int root, const OpOptions& o) {
  submit(*impl_, OpType::scatter, send, recv, count, dt, RedOp::sum, root, o, true);
}
void Communicator::scatterv(const void* send, std::span<const size_t> sendcounts, std::span<const size_t> displs,
                            void* recv, size_t recvcount, DataType dt, int root, const OpOptions& o) {
  scatterv_call(*impl_, send, sendcounts, displs, recv, recvcount, dt, root, o, true);
}
void Communicator::allgatherv(const void* send, void* recv, std::span<const size_t> counts,
                              std::span<const size_t> displs, DataType dt, const OpOptions& o) {
  allgatherv_call(*impl_, send, recv, counts, displs, dt, o, true);
}
void Communicator::reducescatterv(const void* send, void* recv, std::span<const size_t> recvcounts, DataType dt,
                                  RedOp op, const OpOptions& o) {
  reducescatterv_call(*impl_, send, recv, recvcounts, dt, op, o, true);
}
void Communicator::send(const void* buf, size_t count, DataType dt, int peer, const OpOptions& o) {
  send(buf, count, dt, peer, 0, o);
}
void Communicator::send(const void* buf, size_t count, DataType dt, int peer, int tag, const OpOptions& o) {
  impl_->point_to_point(p2p_task(OpType::send, buf, nullptr, count, dt, peer, tag, o, size()));
}
RecvStatus Communicator::recv(void* buf, size_t count, DataType dt, int peer, const OpOptions& o) {
  return recv(buf, count, dt, peer, 0, o);
}
RecvStatus Communicator::recv(void* buf, size_t count, DataType dt, int peer, int tag, const OpOptions& o) {
  return impl_->point_to_point(p2p_task(OpType::recv, nullptr, buf, count, dt, peer, tag, o, size()));
}

void Communicator::group_start() { impl_->p2p().group_start(); }
void Communicator::group_end() { impl_->p2p().group_end(); }
Work Communicator::group_end_async() { return impl_->p2p().group_end_async(); }

GroupScope::GroupScope(Communicator& c) : comm_(c) { comm_.group_start(); }
GroupScope::~GroupScope() {
  if (!ended_) comm_.group_end_async();
}
void GroupScope::end() {
  ended_ = true;
  comm_.group_end();
}

std::shared_ptr<Communicator> Communicator::split(int color, int key) { return impl_->split(color, key); }
void Communicator::abort(const std::string& reason) { impl_->abort(reason); }
bool Communicator::aborted() const { return impl_->aborted(); }
void Communicator::revoke(const std::string& reason) { impl_->revoke(reason); }
bool Communicator::revoked() const { return impl_->revoked(); }
std::shared_ptr<Communicator> Communicator::shrink() { return impl_->shrink(); }
Agreement Communicator::agree(bool value) { return impl_->agree(value); }
std::shared_ptr<Communicator> Communicator::grow(int k) { return impl_->grow(k); }
int64_t Communicator::waiting_newcomers() { return impl_->waiting_newcomers(); }
void Communicator::set_timeout(std::chrono::milliseconds t) { impl_->set_timeout(t); }
std::chrono::milliseconds Communicator::timeout() const { return impl_->timeout(); }
CommStats Communicator::stats() const { return impl_->stats(); }
void Communicator::reset_stats() { impl_->reset_stats(); }
std::string Communicator::last_algorithm() const { return impl_->last_algorithm(); }

}  // namespace hoop
