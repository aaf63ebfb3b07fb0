// DDP and ZeRO 1-3 over a communicator (see include/hoop/dp.h for the model of use and
// src/dp/layout.h for where every element lives).
#include <algorithm>
#include <cstring>
#include <exception>

#include "core/errors.h"
#include "dp/data_parallel_impl.h"
#include "dp/optimizer.h"
#include "kernels/reduce.h"

namespace hoop::dp::detail {

namespace {

// Copies n elements, converting between f32 and the 16-bit float types when they differ.
void convert(std::byte* dst, DataType dst_dt, const std::byte* src, DataType src_dt, size_t n) {
  if (n == 0) return;
  if (dst_dt == src_dt) {
    std::memcpy(dst, src, n * dtype_size(dst_dt));
  } else if (dst_dt == DataType::f32) {
    kernels::to_f32(reinterpret_cast<float*>(dst), src, src_dt, n);
  } else {
    kernels::from_f32(dst, dst_dt, reinterpret_cast<const float*>(src), n);
  }
}

const std::byte* bytes_of(const float* p) { return reinterpret_cast<const std::byte*>(p); }
std::byte* bytes_of(float* p) { return reinterpret_cast<std::byte*>(p); }

}  // namespace

DataParallelImpl::DataParallelImpl(std::shared_ptr<Communicator> comm, DpConfig config)
    : comm_(std::move(comm)), cfg_(std::move(config)) {
  if (comm_) {
    rank_ = comm_->rank();
    nranks_ = comm_->size();
    timer_ = std::make_unique<CommTimer>();
    if (cfg_.registered) pool_ = std::make_unique<RegisteredPool>(comm_.get());
  }
  HOOP_CHECK_ARG(cfg_.stage >= 0 && cfg_.stage <= 3, ctx("DataParallel"),
                 "ZeRO stage {} (expected 0, 1, 2 or 3)", cfg_.stage);
  HOOP_CHECK_ARG(cfg_.first_bucket_bytes > 0 && cfg_.bucket_bytes > 0, ctx("DataParallel"),
                 "bucket sizes must be positive (first {}, then {})", cfg_.first_bucket_bytes,
                 cfg_.bucket_bytes);
  HOOP_CHECK_ARG(cfg_.redundancy == 0 || cfg_.redundancy == 1, ctx("DataParallel"),
                 "redundancy {} (expected 0 or 1: copies of each shard kept in memory)", cfg_.redundancy);
  mixed_ = cfg_.precision == Precision::bf16;
  pdt_ = mixed_ ? DataType::bf16 : DataType::f32;
  if (auto hook = make_comm_hook(cfg_.compress)) register_comm_hook(std::move(hook));
}

void DataParallelImpl::register_comm_hook(std::shared_ptr<CommHook> hook) {
  HOOP_CHECK_ARG(!finalized_, ctx("dp.register_comm_hook"), "a hook must come before finalize()");
  HOOP_CHECK_ARG(hook != nullptr, ctx("dp.register_comm_hook"), "null hook");
  HOOP_CHECK_ARG(hook->supports_stage(cfg_.stage), ctx("dp.register_comm_hook"),
                 "the '{}' communication hook does not support ZeRO stage {}", hook->name(),
                 cfg_.stage);
  hook_ = std::move(hook);
}

DataParallelImpl::~DataParallelImpl() {
  auto settle = [](Work& w) {
    try {
      if (w.valid()) w.wait();
    } catch (const std::exception&) {
      // Already reported to whoever waited on it; the buffers may go now.
    }
  };
  for (LaunchedBucket& lb : launched_) settle(lb.work);
  for (auto& [layer, gl] : gathered_) settle(gl.work);
  hook_runner_.reset();  // finishes the hooks still queued, which use the buffers
}

bool DataParallelImpl::LaunchedBucket::done() {
  if (hooked.valid()) return hooked.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  return work.valid() && work.test();
}

void DataParallelImpl::LaunchedBucket::wait(CommTimer* timer) {
  if (hooked.valid()) {
    if (timer) {
      timer->wait(hooked);
    } else {
      hooked.get();
    }
  } else if (work.valid()) {
    timer->wait(work);
  }
}

ErrorContext DataParallelImpl::ctx(const char* op) const {
  ErrorContext c;
  c.rank = rank_;
  c.op = op;
  return c;
}

int DataParallelImpl::register_param(const std::string& name, const std::vector<size_t>& shape,
                                     int layer, const float* initial) {
  HOOP_CHECK_ARG(!finalized_, ctx("dp.register_param"), "'{}' registered after finalize()", name);
  HOOP_CHECK_ARG(!shape.empty(), ctx("dp.register_param"), "'{}' has an empty shape", name);
  size_t numel = 1;
  for (size_t d : shape) numel *= d;
  HOOP_CHECK_ARG(numel > 0, ctx("dp.register_param"), "'{}' has no elements", name);
  const int last = layout_.tensors.empty() ? 0 : layout_.tensors.back().layer;
  HOOP_CHECK_ARG(layer >= 0 && (layer == last || layer == last + (layout_.tensors.empty() ? 0 : 1)),
                 ctx("dp.register_param"),
                 "'{}' in layer {}: layers must be registered in order, the last was {}", name,
                 layer, last);
  TensorSlot t;
  t.name = name;
  t.numel = numel;
  t.shape = shape;
  t.layer = layer;
  layout_.tensors.push_back(t);
  initial_.emplace_back(numel, 0.0f);
  if (initial != nullptr) std::copy(initial, initial + numel, initial_.back().begin());
  return static_cast<int>(layout_.tensors.size()) - 1;
}

size_t DataParallelImpl::flat(int t) const {
  const TensorSlot& s = layout_.tensors[static_cast<size_t>(t)];
  return layout_.layer_offset[static_cast<size_t>(s.layer)] + s.layer_offset;
}

void DataParallelImpl::finalize() {
  HOOP_CHECK_ARG(!finalized_, ctx("dp.finalize"), "finalize() called twice");
  HOOP_CHECK_ARG(!layout_.tensors.empty(), ctx("dp.finalize"), "no parameters registered");
  layout_.build(nranks_, pbytes(), cfg_.first_bucket_bytes, cfg_.bucket_bytes);
  for (const Group& b : layout_.buckets) {
    bucket_info_.push_back(BucketInfo{b.tensors, b.numel * pbytes()});
  }

  // Rank 0's initial values everywhere.
  std::vector<float> full;
  full.reserve(layout_.numel);
  for (auto& v : initial_) full.insert(full.end(), v.begin(), v.end());
  initial_.clear();
  if (comm_ && nranks_ > 1) {
    comm_->broadcast(full.data(), full.data(), full.size(), DataType::f32, 0, cfg_.op_options);
  }

  const size_t n = layout_.numel, shard = layout_.shard, pb = pbytes();
  const int stage = cfg_.stage;
  params_ = TrackedBuffer(ledger_, MemKind::params, (stage == 3 ? shard : n) * pb, pool());
  const size_t grad_elems = stage == 0 ? n : stage == 1 ? shard * static_cast<size_t>(nranks_)
                                                        : shard;
  grads_ = TrackedBuffer(ledger_, MemKind::grads, grad_elems * pb, pool());
  if (mixed_) master_ = TrackedBuffer(ledger_, MemKind::optimizer, domain() * sizeof(float));
  const int nstates = optimizer_state_count(cfg_.optimizer);
  if (nstates >= 1) state0_ = TrackedBuffer(ledger_, MemKind::optimizer, domain() * sizeof(float));
  if (nstates >= 2) state1_ = TrackedBuffer(ledger_, MemKind::optimizer, domain() * sizeof(float));
  set_initial(full);

  pending_.assign(layout_.buckets.size(), 0);
  for (const Group& b : layout_.buckets) pending_[&b - layout_.buckets.data()] =
      static_cast<int>(b.tensors.size());
  filling_.resize(layout_.buckets.size());
  layer_f32_.resize(layout_.layers.size());
  grads_given_.assign(layout_.layers.size(), false);
  if (hook_) {
    for (const Group& b : layout_.buckets) {
      GradBucket gb;
      gb.index = static_cast<int>(&b - layout_.buckets.data());
      gb.dtype = pdt_;
      gb.numel = b.numel;
      for (int t : b.tensors) {
        const TensorSlot& s = layout_.tensors[static_cast<size_t>(t)];
        gb.tensors.push_back(BucketTensor{t, s.name, s.shape, s.bucket_offset, s.numel});
      }
      hook_buckets_.push_back(std::move(gb));
    }
    hook_->setup(hook_context(), hook_buckets_);
    hook_runner_ = std::make_unique<HookRunner>();
  }
  finalized_ = true;
  if (cfg_.redundancy == 1) {
    prepare_commit();  // the initial states are the first commit
    promote_commit();
  }
}

CommHookContext DataParallelImpl::hook_context() const {
  return CommHookContext{comm_.get(), rank_, nranks_, steps_, cfg_.op_options, &cfg_.optimizer};
}

void DataParallelImpl::set_params_from_full(int t, const float* full) {
  const TensorSlot& s = layout_.tensors[static_cast<size_t>(t)];
  const size_t pb = pbytes();
  const size_t b = s.begin(rank_), v = s.valid(rank_);
  if (cfg_.stage == 3) {
    convert(params_.data() + s.shard_offset * pb, pdt_, bytes_of(full + b), DataType::f32, v);
  } else {
    convert(params_.data() + flat(t) * pb, pdt_, bytes_of(full), DataType::f32, s.numel);
  }
  if (mixed_) {
    if (zero()) {
      std::copy(full + b, full + b + v, master_.as<float>() + s.shard_offset);
    } else {
      std::copy(full, full + s.numel, master_.as<float>() + flat(t));
    }
  }
}

void DataParallelImpl::set_initial(const std::vector<float>& full) {
  for (size_t t = 0; t < layout_.tensors.size(); ++t) {
    set_params_from_full(static_cast<int>(t), full.data() + flat(static_cast<int>(t)));
  }
}

void DataParallelImpl::check_layer(int layer, const char* op) const {
  HOOP_CHECK_ARG(finalized_, ctx(op), "call finalize() first");
  HOOP_CHECK_ARG(layer >= 0 && static_cast<size_t>(layer) < layout_.layers.size(), ctx(op),
                 "layer {} of {}", layer, layout_.layers.size());
}

// ---------------------------------------------------------------- parameters for compute

const float* DataParallelImpl::layer_params(int layer, Phase phase) {
  check_layer(layer, "dp.layer_params");
  const size_t l = static_cast<size_t>(layer);
  if (cfg_.stage == 3) {
    if (!gathered_.count(layer)) start_gather(layer);
    const int next = phase == Phase::forward ? layer + 1 : layer - 1;
    if (cfg_.prefetch && next >= 0 && static_cast<size_t>(next) < layout_.layers.size() &&
        !gathered_.count(next)) {
      start_gather(next);
    }
    return finish_gather(layer);
  }
  if (!mixed_) return params_.as<float>() + layout_.layer_offset[l];
  if (!layer_f32_[l]) {
    TrackedBuffer view(ledger_, MemKind::comm, layout_.layers[l].numel * sizeof(float));
    convert(view.data(), DataType::f32, params_.data() + layout_.layer_offset[l] * pbytes(), pdt_,
            layout_.layers[l].numel);
    layer_f32_[l] = std::move(view);
  }
  return layer_f32_[l]->as<float>();
}

void DataParallelImpl::release_layer(int layer, Phase) {
  check_layer(layer, "dp.release_layer");
  if (cfg_.stage == 3) {
    auto it = gathered_.find(layer);
    if (it != gathered_.end()) {
      if (!it->second.unpacked && it->second.work.valid()) timer_->wait(it->second.work);
      gathered_.erase(it);
    }
    return;
  }
  layer_f32_[static_cast<size_t>(layer)].reset();
}

void DataParallelImpl::start_gather(int layer) {
  const Group& g = layout_.layers[static_cast<size_t>(layer)];
  GatheredLayer& gl = gathered_[layer];
  const size_t pb = pbytes();
  gl.packed = TrackedBuffer(ledger_, MemKind::comm, g.seg * static_cast<size_t>(nranks_) * pb, pool());
  const std::byte* send = params_.data() + g.shard_offset * pb;
  if (comm_) {
    gl.work = comm_->allgather_async(send, gl.packed.data(), g.seg, pdt_, cfg_.op_options);
    timer_->issued(gl.work);
  } else {
    std::memcpy(gl.packed.data(), send, g.seg * pb);
  }
}

const float* DataParallelImpl::finish_gather(int layer) {
  GatheredLayer& gl = gathered_.at(layer);
  if (!gl.unpacked) {
    if (gl.work.valid()) timer_->wait(gl.work);
    const Group& g = layout_.layers[static_cast<size_t>(layer)];
    gl.view = TrackedBuffer(ledger_, MemKind::comm, g.numel * sizeof(float));
    unpack_group(g, gl.packed.data(), gl.view.data(), DataType::f32,
                 [&](const TensorSlot& s) { return s.layer_offset; });
    gl.packed.reset();
    gl.unpacked = true;
  }
  return gl.view.as<float>();
}

template <class Offset>
void DataParallelImpl::unpack_group(const Group& g, const std::byte* packed, std::byte* dst,
                                    DataType dst_dt, Offset offset) const {
  const size_t pb = pbytes(), db = dtype_size(dst_dt);
  for (int q = 0; q < nranks_; ++q) {
    const std::byte* seg = packed + static_cast<size_t>(q) * g.seg * pb;
    for (int t : g.tensors) {
      const TensorSlot& s = layout_.tensors[static_cast<size_t>(t)];
      convert(dst + (offset(s) + s.begin(q)) * db, dst_dt,
              seg + (s.shard_offset - g.shard_offset) * pb, pdt_, s.valid(q));
    }
  }
}

void DataParallelImpl::pack_tensor(const Group& g, int t, const float* src,
                                   std::byte* packed) const {
  const TensorSlot& s = layout_.tensors[static_cast<size_t>(t)];
  const size_t pb = pbytes();
  for (int q = 0; q < nranks_; ++q) {
    std::byte* dst = packed + (static_cast<size_t>(q) * g.seg + s.shard_offset - g.shard_offset) * pb;
    convert(dst, pdt_, bytes_of(src + s.begin(q)), DataType::f32, s.valid(q));
  }
}

// ---------------------------------------------------------------- gradients

void DataParallelImpl::layer_grads(int layer, const float* grads) {
  check_layer(layer, "dp.layer_grads");
  HOOP_CHECK_ARG(!grads_given_[static_cast<size_t>(layer)], ctx("dp.layer_grads"),
                 "gradients of layer {} given twice in one step", layer);
  grads_given_[static_cast<size_t>(layer)] = true;
  const size_t pb = pbytes();
  for (size_t i = 0; i < layout_.tensors.size(); ++i) {
    const TensorSlot& s = layout_.tensors[i];
    if (s.layer != layer) continue;
    const int t = static_cast<int>(i);
    const Group& b = layout_.buckets[static_cast<size_t>(s.bucket)];
    const float* src = grads + s.layer_offset;
    if (cfg_.stage == 0) {
      convert(grads_.data() + (b.flat_offset + s.bucket_offset) * pb, pdt_, bytes_of(src),
              DataType::f32, s.numel);
    } else if (cfg_.stage == 1) {
      pack_tensor(b, t, src, grads_.data() + b.shard_offset * static_cast<size_t>(nranks_) * pb);
    } else {
      TrackedBuffer& staging = filling_[static_cast<size_t>(s.bucket)];
      if (staging.empty()) {
        staging = TrackedBuffer(ledger_, MemKind::comm, b.seg * static_cast<size_t>(nranks_) * pb, pool());
      }
      pack_tensor(b, t, src, staging.data());
    }
    --pending_[static_cast<size_t>(s.bucket)];
  }
  // Buckets start in order (every rank issues the same sequence): a complete bucket waits for
  // the ones before it.
  while (next_bucket_ < pending_.size() && pending_[next_bucket_] == 0) {
    launch_bucket(static_cast<int>(next_bucket_++));
  }
}

// Queues bucket b's hook: stage 0 averages the bucket in place, stages 1-2 reduce `segments`
// (N segments) into `shard`.
std::shared_future<void> DataParallelImpl::launch_hook(int b, std::byte* segments,
                                                       std::byte* shard) {
  const CommHookContext c = hook_context();
  if (cfg_.stage == 0) {
    GradBucket& gb = hook_buckets_[static_cast<size_t>(b)];
    gb.data = grads_.data() + layout_.buckets[static_cast<size_t>(b)].flat_offset * pbytes();
    return hook_runner_->run([this, c, &gb] { hook_->allreduce(c, gb); });
  }
  ShardedGradBucket sb{b, segments, shard, pdt_, layout_.buckets[static_cast<size_t>(b)].seg};
  return hook_runner_->run([this, c, sb]() mutable { hook_->reducescatter(c, sb); });
}

void DataParallelImpl::launch_bucket(int bucket) {
  const Group& b = layout_.buckets[static_cast<size_t>(bucket)];
  const size_t pb = pbytes();
  LaunchedBucket lb;
  lb.bucket = bucket;
  // Stages 1-3: the bucket's N segments and this rank's reduced one.
  std::byte* segments = nullptr;
  std::byte* shard = nullptr;
  if (cfg_.stage == 1) {
    segments = grads_.data() + b.shard_offset * static_cast<size_t>(nranks_) * pb;
    shard = segments + static_cast<size_t>(rank_) * b.seg * pb;
  } else if (cfg_.stage >= 2) {
    lb.staging = std::move(filling_[static_cast<size_t>(bucket)]);
    segments = lb.staging.data();
    shard = grads_.data() + b.shard_offset * pb;
  }
  if (hook_) {
    lb.hooked = launch_hook(bucket, segments, shard);
    if (timer_) timer_->issued(lb.hooked);
  } else if (cfg_.stage == 0) {
    std::byte* p = grads_.data() + b.flat_offset * pb;
    if (comm_) lb.work = comm_->allreduce_async(p, p, b.numel, pdt_, RedOp::avg, cfg_.op_options);
  } else if (comm_) {
    lb.work = comm_->reducescatter_async(segments, shard, b.seg, pdt_, RedOp::avg, cfg_.op_options);
  } else if (cfg_.stage >= 2) {
    std::memcpy(shard, segments, b.seg * pb);
  }
  if (lb.work.valid()) timer_->issued(lb.work);
  launch_order_.push_back(bucket);
  launched_.push_back(std::move(lb));
  // Staging buffers of buckets already reduced go back now, not at the step.
  for (LaunchedBucket& done : launched_) {
    if (!done.staging.empty() && done.done()) done.staging.reset();
  }
}

void DataParallelImpl::wait_buckets() {
  for (LaunchedBucket& lb : launched_) {
    lb.wait(timer_.get());
    lb.staging.reset();
  }
  launched_.clear();
}

// ---------------------------------------------------------------- the update

float* DataParallelImpl::master_ptr(int t) {
  const TensorSlot& s = layout_.tensors[static_cast<size_t>(t)];
  if (mixed_) return master_.as<float>() + (zero() ? s.shard_offset : flat(t));
  switch (cfg_.stage) {
    case 0: return params_.as<float>() + flat(t);
    case 3: return params_.as<float>() + s.shard_offset;
    default: return params_.as<float>() + flat(t) + s.begin(rank_);
  }
}

const void* DataParallelImpl::grad_ptr(int t) {
  const TensorSlot& s = layout_.tensors[static_cast<size_t>(t)];
  const Group& b = layout_.buckets[static_cast<size_t>(s.bucket)];
  const size_t pb = pbytes();
  switch (cfg_.stage) {
    case 0: return grads_.data() + (b.flat_offset + s.bucket_offset) * pb;
    case 1:
      return grads_.data() + (b.shard_offset * static_cast<size_t>(nranks_) +
                              static_cast<size_t>(rank_) * b.seg + s.shard_offset - b.shard_offset) *
                                 pb;
    default: return grads_.data() + s.shard_offset * pb;
  }
}

// Writes the updated f32 values of tensor t where the parameters come from: the bf16
// parameters (stages 0, 3) or the send buffer of the AllGather (stages 1, 2).
void DataParallelImpl::publish_updated(int t, std::byte* send_staging) {
  const TensorSlot& s = layout_.tensors[static_cast<size_t>(t)];
  const size_t pb = pbytes();
  const float* m = master_ptr(t);
  switch (cfg_.stage) {
    case 0:
      if (mixed_) convert(params_.data() + flat(t) * pb, pdt_, bytes_of(m), DataType::f32, s.numel);
      break;
    case 3:
      if (mixed_) {
        convert(params_.data() + s.shard_offset * pb, pdt_, bytes_of(m), DataType::f32,
                s.valid(rank_));
      }
      break;
    default:
      convert(send_staging + s.shard_offset * pb, pdt_, bytes_of(m), DataType::f32,
              s.valid(rank_));
  }
}

void DataParallelImpl::step() {
  HOOP_CHECK_ARG(finalized_, ctx("dp.step"), "call finalize() first");
  for (size_t b = 0; b < pending_.size(); ++b) {
    HOOP_CHECK_ARG(pending_[b] == 0, ctx("dp.step"),
                   "bucket {} still misses {} gradient(s): every layer must call layer_grads() "
                   "before step()", b, pending_[b]);
  }
  wait_buckets();
  // 1-bit Adam: past the warm-up the gradients hold the step direction.
  const uint64_t frozen_at = hook_ ? hook_->variance_frozen_at() : 0;
  const bool direction = frozen_at > 0 && steps_ >= frozen_at;
  ++steps_;
  const int nstates = optimizer_state_count(cfg_.optimizer);
  const size_t pb = pbytes();
  TrackedBuffer send;
  if (cfg_.stage == 1 || cfg_.stage == 2) send = TrackedBuffer(ledger_, MemKind::comm, layout_.shard * pb, pool());
  for (size_t i = 0; i < layout_.tensors.size(); ++i) {
    const int t = static_cast<int>(i);
    const TensorSlot& s = layout_.tensors[i];
    const size_t n = zero() ? s.valid(rank_) : s.numel;
    const size_t off = zero() ? s.shard_offset : flat(t);
    if (n > 0) {
      optimizer_update(cfg_.optimizer, steps_, master_ptr(t), grad_ptr(t), pdt_,
                       nstates >= 1 ? state0_.as<float>() + off : nullptr,
                       nstates >= 2 ? state1_.as<float>() + off : nullptr, n, direction);
    }
    publish_updated(t, send.data());
  }
  if (!send.empty()) {
    // Every bucket's slices back to every rank, then into the full parameters.
    std::vector<std::pair<Work, TrackedBuffer>> gathers;
    for (const Group& b : layout_.buckets) {
      TrackedBuffer recv(ledger_, MemKind::comm, b.seg * static_cast<size_t>(nranks_) * pb);
      Work w;
      if (comm_) {
        w = comm_->allgather_async(send.data() + b.shard_offset * pb, recv.data(), b.seg, pdt_,
                                   cfg_.op_options);
        timer_->issued(w);
      } else {
        std::memcpy(recv.data(), send.data() + b.shard_offset * pb, b.seg * pb);
      }
      gathers.emplace_back(std::move(w), std::move(recv));
    }
    for (size_t b = 0; b < gathers.size(); ++b) {
      if (gathers[b].first.valid()) timer_->wait(gathers[b].first);
      unpack_group(layout_.buckets[b], gathers[b].second.data(), params_.data(), pdt_,
                   [&](const TensorSlot& s) { return flat(static_cast<int>(&s - layout_.tensors.data())); });
      gathers[b].second.reset();
    }
  }
  gathered_.clear();
  for (size_t b = 0; b < layout_.buckets.size(); ++b) {
    pending_[b] = static_cast<int>(layout_.buckets[b].tensors.size());
  }
  launch_order_.clear();
  next_bucket_ = 0;
  std::fill(grads_given_.begin(), grads_given_.end(), false);
  if (timer_) last_timing_ = timer_->finish_step();
}

std::vector<float> DataParallelImpl::gather_tensor(int tensor) {
  HOOP_CHECK_ARG(finalized_ && tensor >= 0 && static_cast<size_t>(tensor) < layout_.tensors.size(),
                 ctx("dp.gather_tensor"), "tensor {} of {}", tensor, layout_.tensors.size());
  const TensorSlot& s = layout_.tensors[static_cast<size_t>(tensor)];
  std::vector<float> out(s.numel);
  if (cfg_.stage != 3) {
    convert(bytes_of(out.data()), DataType::f32, params_.data() + flat(tensor) * pbytes(), pdt_,
            s.numel);
    return out;
  }
  const bool had = gathered_.count(s.layer) > 0;
  if (!had) start_gather(s.layer);
  const float* view = finish_gather(s.layer);
  std::copy(view + s.layer_offset, view + s.layer_offset + s.numel, out.begin());
  if (!had) gathered_.erase(s.layer);
  return out;
}

}  // namespace hoop::dp::detail
