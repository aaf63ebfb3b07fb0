// The public Communicator: argument packing; the work happens in CommImpl.
#include "hoop/communicator.h"

#include "comm/comm_impl.h"

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

// NCCL's in-place conventions.
bool in_place(OpType op, const void* send, const void* recv, size_t count, DataType dt, int rank) {
  if (!send || !recv) return false;
  const auto* s = static_cast<const std::byte*>(send);
  const auto* r = static_cast<const std::byte*>(recv);
  const size_t block = count * dtype_size(dt) * static_cast<size_t>(rank);
  switch (op) {
    case OpType::reducescatter: return r == s + block;
    case OpType::allgather: return s == r + block;
    default: return s == r;
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
  t.desc.in_place = in_place(op, send, recv, count, dt, impl.rank());
  return impl.submit(std::move(t), blocking);
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
Work Communicator::send_async(const void* buf, size_t count, DataType dt, int peer, const OpOptions& o) {
  return submit(*impl_, OpType::send, buf, nullptr, count, dt, RedOp::sum, peer, o, false);
}
Work Communicator::recv_async(void* buf, size_t count, DataType dt, int peer, const OpOptions& o) {
  return submit(*impl_, OpType::recv, nullptr, buf, count, dt, RedOp::sum, peer, o, false);
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
void Communicator::send(const void* buf, size_t count, DataType dt, int peer, const OpOptions& o) {
  submit(*impl_, OpType::send, buf, nullptr, count, dt, RedOp::sum, peer, o, true);
}
void Communicator::recv(void* buf, size_t count, DataType dt, int peer, const OpOptions& o) {
  submit(*impl_, OpType::recv, nullptr, buf, count, dt, RedOp::sum, peer, o, true);
}

std::shared_ptr<Communicator> Communicator::split(int color, int key) { return impl_->split(color, key); }
void Communicator::abort(const std::string& reason) { impl_->abort(reason); }
bool Communicator::aborted() const { return impl_->aborted(); }
void Communicator::set_timeout(std::chrono::milliseconds t) { impl_->set_timeout(t); }
std::chrono::milliseconds Communicator::timeout() const { return impl_->timeout(); }
CommStats Communicator::stats() const { return impl_->stats(); }
void Communicator::reset_stats() { impl_->reset_stats(); }
std::string Communicator::last_algorithm() const { return impl_->last_algorithm(); }

}  // namespace hoop
