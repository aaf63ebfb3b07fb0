// Running one collective: the failure and abort checks, the optional signature exchange, then
// the chosen algorithm's schedule on the engine (over links, or over the shared region for
// shm-direct), through f16/bf16 staging where a half type is reduced.
#include "comm/comm_impl.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "comm/collective_args.h"
#include "comm/region_shape.h"
#include "comm/transports.h"
#include "core/errors.h"
#include "core/log.h"
#include "core/op_traits.h"
#include "transport/shm/buffer_registry.h"

namespace hoop::detail {

namespace {

// Header phase of the HOOP_CHECK=1 signature exchange.
constexpr uint8_t kSignaturePhase = 0x80;

// schedule::runs_here for shm-direct, looked up once per process for every collective and
// reach (the registry is fixed): the answer costs a table read on the per-call path.
bool direct_runs_here(OpType op, const schedule::Reach& reach) {
  constexpr size_t kOps = static_cast<size_t>(OpType::reducescatterv) + 1;
  static const auto table = [] {
    std::array<bool, kOps * 4> t{};
    for (size_t i = 0; i < kOps; ++i) {
      for (size_t bits = 0; bits < 4; ++bits) {
        t[i * 4 + bits] = schedule::runs_here(schedule::kDirectAlgorithm, static_cast<OpType>(i),
                                               schedule::Reach{(bits & 1) != 0, (bits & 2) != 0});
      }
    }
    return t;
  }();
  const auto op_index = static_cast<size_t>(op);
  if (op_index >= kOps) return false;
  return table[op_index * 4 + (reach.one_host ? 1 : 0) + (reach.shared_memory ? 2 : 0)];
}

}  // namespace

void CommImpl::execute(const OpTask& t) {
  // Built only when raised: the common call pays for no string.
  const auto ctx = [&] { return ErrorContext{rank_, std::string(to_string(t.desc.op)), t.seq, -1}; };
  refuse_if_revoked(t);
  if (failure_) {
    throw_error(failure_->code(), fmt::format("the communicator is unusable after an earlier failure: {}", failure_->what()),
                ctx());
  }
  const auto timeout = t.opts.timeout.value_or(this->timeout());
  engine::OpIdentity id;
  id.op = t.desc.op;
  id.dtype = t.dtype;
  id.redop = t.desc.redop;
  id.count = t.desc.count;
  id.root = has_root(t.desc.op) ? t.desc.root : -1;
  id.seq = t.seq;
  id.comm_id = comm_id_;
  id.rank = rank_;
  try {
    if (abort_flag_.load()) throw_error(ErrorCode::aborted, "the communicator was aborted", ctx());
    if (signature_check_) {
      engine::OpIdentity check = id;
      check.phase = kSignaturePhase;
      run_schedule(schedule::signature_ring(size(), rank_), t.dtype, engine::Buffers{}, check, timeout);
    }
    const Registration reg = registration(t);
    const Prepared& run = prepare(t, reg.all);
    id.in_place = t.desc.in_place;
    if (!run.schedule) {
      OpTask task = t;
      task.desc.region = region_shape(DataType::f32);
      task.desc.nchannels = run.nchannels;
      run_half_precision(task, run.algo, id, timeout);
    } else {
      engine::Buffers bufs{t.send, t.recv, nullptr};
      if (run.schedule->announces_buffers) {
        bufs.registered = reg.buffers;
        bufs.all_registered = reg.all;
      }
      run_schedule(*run.schedule, t.dtype, bufs, id, timeout);
    }
    ++ops_done_;
  } catch (const Error& e) {
    if (e.code() == ErrorCode::invalid_argument) throw;
    fail(e);
  }
}

schedule::Reach CommImpl::reach() const {
  const Transport* forced = forced_transport(transport_mode_);
  return schedule::Reach{local_size_ == size(), !forced || forced->kind == TransportKind::shm};
}

CommImpl::Registration CommImpl::registration(const OpTask& t) const {
  Registration reg;
  const auto& registry = transport::shm::BufferRegistry::instance();
  if (registry.empty() || local_size_ != size() || is_vector_op(t.desc.op)) return reg;
  const Extents e = call_extents(t.desc.op, t.desc.count, rank_, size(), t.desc.root);
  const size_t es = dtype_size(t.dtype);
  // Calls that go through the cells read no peer's buffer: no lookup.
  if (std::max(e.send, e.recv) * es <= direct_tunables(size(), single_copy_read_bytes()).small_bytes) return reg;
  bool all = e.send > 0 || e.recv > 0;
  const auto announce = [&](const void* p, size_t elements, transport::shm::AnnouncedBuffer& out) {
    if (elements == 0) return;
    const auto r = registry.find(p, elements * es);
    if (!r) {
      all = false;
      return;
    }
    out.fd = r->fd;
    out.id = static_cast<uint32_t>(r->id);
    out.map_offset = r->map_offset;
    out.map_bytes = r->map_bytes;
    out.delta = r->delta + (reinterpret_cast<uintptr_t>(p) - r->base);
  };
  announce(t.send, e.send, reg.buffers[0]);
  announce(t.recv, e.recv, reg.buffers[1]);
  reg.all = all;
  return reg;
}

const CommImpl::Prepared& CommImpl::prepare(const OpTask& t, bool registered) {
  const auto& d = t.desc;
  Prepared& p = last_call_;
  const int root = has_root(d.op) ? d.root : -1;
  if (p.valid && !d.blocks && p.op == d.op && p.dtype == t.dtype && p.count == d.count && p.root == root &&
      p.redop == d.redop && p.in_place == d.in_place && p.registered == registered && p.forced == t.opts.algo)
      [[likely]] {
    return p;
  }
  p.valid = false;
  const bool half = is_half_reduction(t.dtype, d.op);
  const DataType elem = half ? DataType::f32 : t.dtype;
  OpTask task = t;
  task.desc.region = region_shape(elem);
  task.desc.registered = registered;
  const AlgoChoice choice = choose_algorithm(task);
  p.algo = choice.name;
  if (p.algo == schedule::kDirectAlgorithm && !direct_runs_here(d.op, reach())) {
    p.algo.clear();  // forced, not applicable here: the default
  }
  p.nchannels = choice.nchannels;
  task.desc.nchannels = choice.nchannels;
  p.schedule = half ? nullptr : schedule_for(p.algo, task.desc, elem);
  p.op = d.op;
  p.dtype = t.dtype;
  p.count = d.count;
  p.root = root;
  p.redop = d.redop;
  p.in_place = d.in_place;
  p.registered = registered;
  p.forced = t.opts.algo;
  p.valid = !d.blocks;  // a v-form's blocks are its own: worked out every time
  return p;
}

void CommImpl::run_schedule(const schedule::RankSchedule& s, DataType elem, const engine::Buffers& bufs,
                            const engine::OpIdentity& id, std::chrono::milliseconds timeout) {
  engine::Buffers b = bufs;
  if (s.scratch_count > 0) b.scratch = scratch_.get(s.scratch_count * dtype_size(elem));
  HOOP_TRACE("{} #{}: {} ({} steps)", to_string(id.op), id.seq, s.algorithm, s.steps.size());
  engine_.run(s, elem, size(), b, id, timeout, counters_);
  if (last_algorithm_ != s.algorithm) last_algorithm_ = s.algorithm;  // no copy per call
}

}  // namespace hoop::detail
