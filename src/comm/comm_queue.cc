// Issue order: a call runs on the caller's thread when nothing is queued, else it is queued
// for the communicator's progress thread. Point-to-point calls go to their own engine.
#include "comm/comm_impl.h"

#include "comm/p2p_engine.h"

namespace hoop::detail {

Work CommImpl::submit(OpTask t, bool blocking) {
  start_revoke_watch();
  std::unique_lock lk(mu_);
  validate(t);  // refused calls consume no sequence number: peers never see them
  t.desc.topology = &topology_;
  t.seq = ++next_seq_;
  if (blocking && queue_.empty() && !busy_) {
    // Fast path: nothing queued, run on the caller's thread. A blocking call has no handle to
    // give back (its caller discards it), so none is made.
    busy_ = true;
    lk.unlock();
    std::exception_ptr error;
    try {
      execute(t);
    } catch (...) {
      error = std::current_exception();
    }
    lk.lock();
    busy_ = false;
    lk.unlock();
    cv_.notify_all();
    if (error) std::rethrow_exception(error);
    return Work();
  }
  auto state = std::make_shared<WorkState>(t.seq);
  t.work = state;
  queue_.push_back(std::move(t));
  if (!worker_.joinable()) worker_ = std::thread([this] { worker_loop(); });
  lk.unlock();
  cv_.notify_all();
  Work w(state);
  if (blocking) w.wait();
  return w;
}

namespace {
P2pCall p2p_call(const OpTask& t, std::chrono::milliseconds timeout) {
  P2pCall c;
  c.send = t.desc.op == OpType::send;
  c.peer = t.desc.root;
  c.tag = t.tag;
  c.dtype = t.dtype;
  c.count = t.desc.count;
  c.send_buf = t.send;
  c.recv_buf = t.recv;
  c.timeout = t.opts.timeout.value_or(timeout);
  return c;
}
}  // namespace

RecvStatus CommImpl::point_to_point(const OpTask& t) {
  validate(t);
  refuse_if_revoked(t);
  start_revoke_watch();
  return p2p_->run(p2p_call(t, timeout()));
}

Work CommImpl::point_to_point_async(const OpTask& t) {
  validate(t);
  refuse_if_revoked(t);
  start_revoke_watch();
  return p2p_->post(p2p_call(t, timeout()));
}

void CommImpl::worker_loop() {
  std::unique_lock lk(mu_);
  for (;;) {
    cv_.wait(lk, [&] { return (stop_ && queue_.empty()) || (!queue_.empty() && !busy_); });
    if (queue_.empty()) return;
    OpTask t = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lk.unlock();
    run_task(t);
    lk.lock();
    busy_ = false;
    cv_.notify_all();
  }
}

void CommImpl::run_task(OpTask& t) {
  std::exception_ptr error;
  try {
    execute(t);
  } catch (...) {
    error = std::current_exception();
  }
  t.work->finish(error);
}

}  // namespace hoop::detail
