#include "process_group_hoop.h"

#include <Python.h>

#include <ATen/core/ivalue.h>
#include <ATen/core/jit_type.h>

#include <set>
#include <string>

#include "c10d_store_adapter.h"
#include "hoop/error.h"
#include "tensor_args.h"

namespace hoop_torch {

namespace {

// How a torch reduction runs in hoop: the element type, the operator, and how many hoop
// elements make one torch element (2 for complex numbers, reduced as pairs of reals).
struct Reduction {
  hoop::DataType dt;
  hoop::RedOp op;
  int64_t lanes = 1;
};

Reduction reduction_for(at::ScalarType st, const c10d::ReduceOp& rop, int rank, const char* op) {
  Reduction r{hoop::DataType::f32, hoop::RedOp::sum, 1};
  bool is_bool = false, is_complex = false;
  switch (st) {
    case at::kFloat: r.dt = hoop::DataType::f32; break;
    case at::kDouble: r.dt = hoop::DataType::f64; break;
    case at::kHalf: r.dt = hoop::DataType::f16; break;
    case at::kBFloat16: r.dt = hoop::DataType::bf16; break;
    case at::kChar: r.dt = hoop::DataType::i8; break;
    case at::kByte: r.dt = hoop::DataType::u8; break;
    case at::kInt: r.dt = hoop::DataType::i32; break;
    case at::kLong: r.dt = hoop::DataType::i64; break;
    case at::kBool: r.dt = hoop::DataType::u8; is_bool = true; break;
    case at::kComplexHalf: r.dt = hoop::DataType::f16; is_complex = true; break;
    case at::kComplexFloat: r.dt = hoop::DataType::f32; is_complex = true; break;
    case at::kComplexDouble: r.dt = hoop::DataType::f64; is_complex = true; break;
    default:
      refuse(rank, op, "dtype " + dtype_name(st) +
                           " cannot be reduced by hoop (float, double, half, bfloat16, int8, "
                           "uint8, int32, int64, bool and complex can)");
  }
  switch (rop.op_) {
    case c10d::ReduceOp::SUM: r.op = hoop::RedOp::sum; break;
    case c10d::ReduceOp::AVG: r.op = hoop::RedOp::avg; break;
    case c10d::ReduceOp::PRODUCT: r.op = hoop::RedOp::prod; break;
    case c10d::ReduceOp::MIN: r.op = hoop::RedOp::min; break;
    case c10d::ReduceOp::MAX: r.op = hoop::RedOp::max; break;
    default:
      refuse(rank, op, "ReduceOp " + std::to_string(static_cast<int>(rop.op_)) +
                           " is not supported by hoop (SUM, AVG, PRODUCT, MIN and MAX are)");
  }
  if (is_bool) {
    // torch's bool reductions are logical: sum is "any", product is "all".
    if (r.op == hoop::RedOp::avg) refuse(rank, op, "ReduceOp.AVG of bool tensors is undefined");
    if (r.op == hoop::RedOp::sum) r.op = hoop::RedOp::max;
    if (r.op == hoop::RedOp::prod) r.op = hoop::RedOp::min;
  }
  if (is_complex) {
    if (r.op != hoop::RedOp::sum && r.op != hoop::RedOp::avg) {
      refuse(rank, op, "complex tensors can only be reduced with SUM or AVG");
    }
    r.lanes = 2;
  }
  return r;
}

size_t reduce_count(const at::Tensor& t, const Reduction& r) {
  return static_cast<size_t>(t.numel() * r.lanes);
}

// The live groups, for drain_all_process_groups.
std::mutex registry_mu;
std::set<ProcessGroupHoop*>& registry() {
  static std::set<ProcessGroupHoop*> groups;
  return groups;
}

// Runs f with the GIL released when this thread holds it. The completion thread may need the
// GIL (dropping the last reference to a tensor Python owns), so nothing may wait for it while
// holding the GIL.
template <typename F>
void without_gil(F&& f) {
  if (Py_IsInitialized() && PyGILState_Check()) {
    PyThreadState* state = PyEval_SaveThread();
    f();
    PyEval_RestoreThread(state);
  } else {
    f();
  }
}

// torch's tags are the non-negative ints; hoop's kAnyTag (-1) would match any message.
void check_tag(int tag, int rank, const char* op) {
  if (tag < 0) refuse(rank, op, "tag " + std::to_string(tag) + " is negative");
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// HoopWork

HoopWork::HoopWork(int rank, c10d::OpType type, const char* profiling_title,
                   std::vector<at::Tensor> outputs, std::vector<at::Tensor> keep_alive,
                   std::function<void()> copy_out)
    : c10d::Work(rank, type, profiling_title),
      outputs_(std::move(outputs)),
      keep_alive_(std::move(keep_alive)),
      copy_out_(std::move(copy_out)),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {}

bool HoopWork::claim() {
  std::lock_guard lk(complete_mu_);
  if (claimed_) return false;
  claimed_ = true;
  return true;
}

void HoopWork::settle() {
  try {
    hoop_work_.wait();
    if (expected_bytes_ && hoop_work_.status().count != *expected_bytes_) {
      const hoop::RecvStatus got = hoop_work_.status();
      throw hoop::Error(hoop::ErrorCode::mismatch,
                        "received " + std::to_string(got.count) + " bytes from rank " +
                            std::to_string(got.source) + " into a tensor of " +
                            std::to_string(*expected_bytes_),
                        hoop::ErrorContext{rank_, "recv", hoop_work_.seq(), got.source});
    }
    if (copy_out_) copy_out_();
  } catch (const hoop::Error& e) {
    // Names the knob for torch's users (and reads as torch's backends do: "... timeout ...").
    error_ = e.code() != hoop::ErrorCode::timeout
                 ? std::current_exception()
                 : std::make_exception_ptr(hoop::Error(
                       e.code(),
                       e.detail() + "; the wait timeout (the process group's timeout, or "
                                    "HOOP_TIMEOUT) expired",
                       e.context()));
  } catch (...) {
    error_ = std::current_exception();
  }
  copy_out_ = nullptr;
  keep_alive_.clear();
}

void HoopWork::publish() {
  // The future first: a caller that returns from wait() may read it at once.
  if (error_) {
    future_->setError(error_);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
  finish(error_);
}

void HoopWork::complete() {
  if (!claim()) return;  // another thread completes it; waiters wait on the Work itself
  settle();
  publish();
}

int HoopWork::sourceRank() const {
  if (!expected_bytes_) return c10d::Work::sourceRank();  // throws: not a receive
  return hoop_work_.status().source;
}

bool HoopWork::isCompleted() {
  bool done = true;
  try {
    done = hoop_work_.test();
  } catch (...) {
    // failed: complete() records the error
  }
  if (done) complete();
  std::lock_guard lk(mutex_);
  return completed_;
}

bool HoopWork::wait(std::chrono::milliseconds timeout) {
  bool done = true;
  if (timeout != kNoTimeout) {
    try {
      done = hoop_work_.wait_for(timeout);
    } catch (...) {
      // failed: complete() records the error, the base wait rethrows it
    }
  }
  if (done) complete();
  return c10d::Work::wait(timeout);
}

// ---------------------------------------------------------------------------------------------
// ProcessGroupHoop

ProcessGroupHoop::ProcessGroupHoop(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                   int size, std::chrono::milliseconds timeout)
    : c10d::ProcessGroup(rank, size) {
  hoop::InitParams params;
  params.rank = rank;
  params.size = size;
  params.store = std::make_shared<C10dStoreAdapter>(store, rank);
  hoop::CommOptions opts;
  // init_process_group's timeout bounds every wait, unless HOOP_TIMEOUT says otherwise.
  opts.fallback_timeout = timeout;
  comm_ = hoop::Communicator::create(params, opts);
  shared_ = std::make_unique<SharedTensors>(*comm_);
  completer_ = std::thread([this] { completion_loop(); });
  init();
  std::lock_guard lk(registry_mu);
  registry().insert(this);
}

ProcessGroupHoop::~ProcessGroupHoop() {
  {
    std::lock_guard lk(registry_mu);
    registry().erase(this);
  }
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  // Python drops the last reference to a group holding the GIL. The completion thread settles
  // every pending work first; the callback threads then publish them. Only the completion
  // thread starts callback threads, so once it has ended their list is final.
  without_gil([&] {
    completer_.join();
    for (auto& t : callback_threads_) t.join();
  });
}

bool ProcessGroupHoop::drain(std::chrono::milliseconds limit) {
  std::unique_lock lk(mu_);
  return drained_cv_.wait_for(lk, limit, [&] { return all_released(); });
}

void drain_all_process_groups(std::chrono::milliseconds limit) {
  without_gil([&] {
    std::lock_guard lk(registry_mu);
    for (ProcessGroupHoop* pg : registry()) pg->drain(limit);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHoop::track(c10::intrusive_ptr<HoopWork> work) {
  {
    std::lock_guard lk(mu_);
    pending_.push_back(work);
  }
  cv_.notify_one();
  return work;
}

void ProcessGroupHoop::completion_loop() {
  std::unique_lock lk(mu_);
  for (;;) {
    cv_.wait(lk, [&] { return stop_ || !pending_.empty(); });
    if (pending_.empty()) break;
    auto work = std::move(pending_.front());
    pending_.pop_front();
    ++in_hand_;
    lk.unlock();
    // hoop runs a communicator's operations in issue order, so waiting in that order never
    // holds back a finished one for long.
    const bool mine = work->claim();
    if (mine) {
      work->settle();
    } else {
      work.reset();  // the thread that claimed it completes it
    }
    lk.lock();
    if (mine) {
      settled_.push_back(std::move(work));
      if (settled_.size() > static_cast<size_t>(idle_callback_threads_)) {
        ++idle_callback_threads_;  // idle from its start: it waits for settled_ first
        callback_threads_.emplace_back([this] { callback_loop(); });
      } else {
        callback_cv_.notify_one();
      }
    }
    --in_hand_;
    if (all_released()) drained_cv_.notify_all();
  }
  settling_done_ = true;
  callback_cv_.notify_all();
}

void ProcessGroupHoop::callback_loop() {
  std::unique_lock lk(mu_);
  for (;;) {
    callback_cv_.wait(lk, [&] { return settling_done_ || !settled_.empty(); });
    --idle_callback_threads_;
    if (settled_.empty()) return;
    auto work = std::move(settled_.front());
    settled_.pop_front();
    ++in_hand_;
    lk.unlock();
    work->publish();
    work.reset();
    lk.lock();
    --in_hand_;
    ++idle_callback_threads_;
    if (all_released()) drained_cv_.notify_all();
  }
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHoop::allreduce(std::vector<at::Tensor>& tensors,
                                                           const c10d::AllreduceOptions& opts) {
  const char* op = "allreduce";
  if (tensors.size() == 1 && tensors[0].defined() && tensors[0].layout() == at::kSparse) {
    return sparse_allreduce(tensors[0], opts);
  }
  const at::Tensor& t = single_tensor(tensors, rank_, op);
  const Reduction r = reduction_for(t.scalar_type(), opts.reduceOp, rank_, op);
  at::Tensor buf = dense(t);
  auto work = c10::make_intrusive<HoopWork>(rank_, c10d::OpType::ALLREDUCE, "hoop:all_reduce",
                                            tensors, std::vector<at::Tensor>{buf},
                                            copy_back_if_staged(t, buf));
  shared_->note(buf);
  void* p = buf.data_ptr();
  work->attach(comm_->allreduce_async(p, p, reduce_count(buf, r), r.dt, r.op, op_options(opts.timeout)));
  return track(std::move(work));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHoop::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  const char* op = "allreduce_coalesced";
  if (tensors.empty()) refuse(rank_, op, "expects at least one tensor");
  for (const auto& t : tensors) {
    check_tensor(t, rank_, op);
    check_same_type(t, tensors[0], rank_, op);
  }
  const Reduction r = reduction_for(tensors[0].scalar_type(), opts.reduceOp, rank_, op);
  // One flat buffer, one operation: many small gradients cost one round of latency.
  std::vector<at::Tensor> flat_parts;
  flat_parts.reserve(tensors.size());
  for (const auto& t : tensors) flat_parts.push_back(t.reshape({-1}));
  at::Tensor flat = at::cat(flat_parts);
  auto copy_out = [tensors, flat]() mutable {
    int64_t offset = 0;
    for (auto& t : tensors) {
      t.copy_(flat.narrow(0, offset, t.numel()).view(t.sizes()));
      offset += t.numel();
    }
  };
  auto work = c10::make_intrusive<HoopWork>(rank_, c10d::OpType::ALLREDUCE_COALESCED,
                                            "hoop:all_reduce_coalesced", tensors,
                                            std::vector<at::Tensor>{flat}, copy_out);
  void* p = flat.data_ptr();
  work->attach(comm_->allreduce_async(p, p, reduce_count(flat, r), r.dt, r.op, op_options(opts.timeout)));
  return track(std::move(work));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHoop::broadcast(std::vector<at::Tensor>& tensors,
                                                           const c10d::BroadcastOptions& opts) {
  const char* op = "broadcast";
  const at::Tensor& t = single_tensor(tensors, rank_, op);
  if (opts.rootTensor != 0) refuse(rank_, op, "rootTensor must be 0");
  at::Tensor buf = dense(t);
  auto work = c10::make_intrusive<HoopWork>(rank_, c10d::OpType::BROADCAST, "hoop:broadcast",
                                            tensors, std::vector<at::Tensor>{buf},
                                            copy_back_if_staged(t, buf));
  shared_->note(buf);
  void* p = buf.data_ptr();
  work->attach(comm_->broadcast_async(p, p, byte_size(buf), hoop::DataType::u8,
                                      static_cast<int>(opts.rootRank), op_options(opts.timeout)));
  return track(std::move(work));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHoop::reduce(std::vector<at::Tensor>& tensors,
                                                        const c10d::ReduceOptions& opts) {
  const char* op = "reduce";
  const at::Tensor& t = single_tensor(tensors, rank_, op);
  if (opts.rootTensor != 0) refuse(rank_, op, "rootTensor must be 0");
  const Reduction r = reduction_for(t.scalar_type(), opts.reduceOp, rank_, op);
  at::Tensor buf = dense(t);
  const int root = static_cast<int>(opts.rootRank);
  auto work = c10::make_intrusive<HoopWork>(
      rank_, c10d::OpType::REDUCE, "hoop:reduce", tensors, std::vector<at::Tensor>{buf},
      root == rank_ ? copy_back_if_staged(t, buf) : nullptr);
  void* p = buf.data_ptr();
  shared_->note(buf);
  work->attach(comm_->reduce_async(p, p, reduce_count(buf, r), r.dt, r.op, root, op_options(opts.timeout)));
  return track(std::move(work));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHoop::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  const char* op = "allgather";
  const at::Tensor& in = single_tensor(inputs, rank_, op);
  if (outputs.size() != 1 || outputs[0].size() != static_cast<size_t>(size_)) {
    refuse(rank_, op, "expects one list of " + std::to_string(size_) + " output tensors");
  }
  for (const auto& o : outputs[0]) {
    check_tensor(o, rank_, op);
    check_same_type(o, in, rank_, op);
    if (o.numel() != in.numel()) {
      refuse(rank_, op, "output tensor has " + std::to_string(o.numel()) +
                            " elements, the input " + std::to_string(in.numel()));
    }
  }
  at::Tensor src = dense(in);
  at::Tensor flat = at::empty({size_ * in.numel()}, src.options());
  std::vector<at::Tensor> outs = outputs[0];
  auto copy_out = [outs, flat, n = in.numel()]() mutable {
    for (size_t i = 0; i < outs.size(); ++i) {
      outs[i].copy_(flat.narrow(0, static_cast<int64_t>(i) * n, n).view(outs[i].sizes()));
    }
  };
  auto work = c10::make_intrusive<HoopWork>(rank_, c10d::OpType::ALLGATHER, "hoop:all_gather",
                                            outs, std::vector<at::Tensor>{src, flat}, copy_out);
  work->attach(comm_->allgather_async(src.data_ptr(), flat.data_ptr(), byte_size(src),
                                      hoop::DataType::u8, op_options(opts.timeout)));
  return track(std::move(work));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHoop::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) {
  const char* op = "_allgather_base";
  check_tensor(output, rank_, op);
  check_tensor(input, rank_, op);
  check_same_type(output, input, rank_, op);
  if (output.numel() != size_ * input.numel()) {
    refuse(rank_, op, "output has " + std::to_string(output.numel()) + " elements, expected " +
                          std::to_string(size_) + " x " + std::to_string(input.numel()));
  }
  at::Tensor dst = dense(output);
  at::Tensor src = dense(input);
  // In place is input == output's own slot; any other overlap reads through a copy.
  const bool in_place = static_cast<char*>(src.data_ptr()) ==
                        static_cast<char*>(dst.data_ptr()) + static_cast<size_t>(rank_) * byte_size(src);
  if (!in_place && overlaps(src, dst)) src = src.clone();
  auto work = c10::make_intrusive<HoopWork>(rank_, c10d::OpType::_ALLGATHER_BASE,
                                            "hoop:_all_gather_base", std::vector<at::Tensor>{output},
                                            std::vector<at::Tensor>{src, dst},
                                            copy_back_if_staged(output, dst));
  shared_->note(src);
  shared_->note(dst);
  work->attach(comm_->allgather_async(src.data_ptr(), dst.data_ptr(), byte_size(src),
                                      hoop::DataType::u8, op_options(opts.timeout)));
  return track(std::move(work));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHoop::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  const char* op = "reduce_scatter";
  const at::Tensor& out = single_tensor(outputs, rank_, op);
  if (inputs.size() != 1 || inputs[0].size() != static_cast<size_t>(size_)) {
    refuse(rank_, op, "expects one list of " + std::to_string(size_) + " input tensors");
  }
  for (const auto& in : inputs[0]) {
    check_tensor(in, rank_, op);
    check_same_type(in, out, rank_, op);
    if (in.numel() != out.numel()) {
      refuse(rank_, op, "input tensor has " + std::to_string(in.numel()) +
                            " elements, the output " + std::to_string(out.numel()));
    }
  }
  const Reduction r = reduction_for(out.scalar_type(), opts.reduceOp, rank_, op);
  std::vector<at::Tensor> parts;
  parts.reserve(inputs[0].size());
  for (const auto& in : inputs[0]) parts.push_back(in.reshape({-1}));
  at::Tensor flat = at::cat(parts);
  at::Tensor dst = dense(out);
  auto work = c10::make_intrusive<HoopWork>(rank_, c10d::OpType::REDUCE_SCATTER,
                                            "hoop:reduce_scatter", outputs,
                                            std::vector<at::Tensor>{flat, dst},
                                            copy_back_if_staged(out, dst));
  work->attach(comm_->reducescatter_async(flat.data_ptr(), dst.data_ptr(), reduce_count(dst, r),
                                          r.dt, r.op, op_options(opts.timeout)));
  return track(std::move(work));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHoop::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  const char* op = "_reduce_scatter_base";
  check_tensor(output, rank_, op);
  check_tensor(input, rank_, op);
  check_same_type(output, input, rank_, op);
  if (input.numel() != size_ * output.numel()) {
    refuse(rank_, op, "input has " + std::to_string(input.numel()) + " elements, expected " +
                          std::to_string(size_) + " x " + std::to_string(output.numel()));
  }
  const Reduction r = reduction_for(output.scalar_type(), opts.reduceOp, rank_, op);
  at::Tensor dst = dense(output);
  at::Tensor src = dense(input);
  // In place is output == input's own slot; any other overlap reads through a copy.
  const bool in_place = static_cast<char*>(dst.data_ptr()) ==
                        static_cast<char*>(src.data_ptr()) + static_cast<size_t>(rank_) * byte_size(dst);
  if (!in_place && overlaps(src, dst)) src = src.clone();
  auto work = c10::make_intrusive<HoopWork>(rank_, c10d::OpType::_REDUCE_SCATTER_BASE,
                                            "hoop:_reduce_scatter_base", std::vector<at::Tensor>{output},
                                            std::vector<at::Tensor>{src, dst},
                                            copy_back_if_staged(output, dst));
  shared_->note(src);
  shared_->note(dst);
  work->attach(comm_->reducescatter_async(src.data_ptr(), dst.data_ptr(), reduce_count(dst, r),
                                          r.dt, r.op, op_options(opts.timeout)));
  return track(std::move(work));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHoop::barrier(const c10d::BarrierOptions& opts) {
  auto work = c10::make_intrusive<HoopWork>(rank_, c10d::OpType::BARRIER, "hoop:barrier",
                                            std::vector<at::Tensor>{}, std::vector<at::Tensor>{},
                                            nullptr);
  work->attach(comm_->barrier_async(op_options(opts.timeout)));
  return track(std::move(work));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHoop::send(std::vector<at::Tensor>& tensors, int dst,
                                                      int tag) {
  const char* op = "send";
  const at::Tensor& t = single_tensor(tensors, rank_, op);
  check_tag(tag, rank_, op);
  at::Tensor buf = dense(t);
  auto work = c10::make_intrusive<HoopWork>(rank_, c10d::OpType::SEND, "hoop:send", tensors,
                                            std::vector<at::Tensor>{buf}, nullptr);
  work->attach(comm_->send_async(buf.data_ptr(), byte_size(buf), hoop::DataType::u8, dst, tag));
  return track(std::move(work));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHoop::recv(std::vector<at::Tensor>& tensors, int src,
                                                      int tag) {
  return receive(tensors, src, tag, c10d::OpType::RECV, "recv");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHoop::recvAnysource(std::vector<at::Tensor>& tensors,
                                                               int tag) {
  return receive(tensors, hoop::kAnySource, tag, c10d::OpType::RECVANYSOURCE, "recvAnysource");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHoop::receive(std::vector<at::Tensor>& tensors, int src,
                                                         int tag, c10d::OpType type, const char* op) {
  const at::Tensor& t = single_tensor(tensors, rank_, op);
  check_tag(tag, rank_, op);
  at::Tensor buf = dense(t);
  auto work = c10::make_intrusive<HoopWork>(rank_, type, "hoop:recv", tensors,
                                            std::vector<at::Tensor>{buf}, copy_back_if_staged(t, buf));
  work->expect_received(byte_size(buf));
  work->attach(comm_->recv_async(buf.data_ptr(), byte_size(buf), hoop::DataType::u8, src, tag));
  return track(std::move(work));
}

c10::intrusive_ptr<c10d::ProcessGroup> create_process_group(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
    std::chrono::milliseconds timeout) {
  return c10::make_intrusive<ProcessGroupHoop>(store, rank, size, timeout);
}

}  // namespace hoop_torch
