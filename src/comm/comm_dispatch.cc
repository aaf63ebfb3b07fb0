// Running one collective: the failure and abort checks, the optional signature exchange, then
// the chosen path (shm-direct, f16/bf16 staging or the algorithm's schedule on the engine).
#include "comm/comm_impl.h"

#include <fmt/format.h>

#include <array>

#include "comm/transports.h"
#include "core/errors.h"
#include "core/log.h"
#include "core/op_traits.h"
#include "direct/direct_comm.h"

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
  const ErrorContext ctx{rank_, std::string(to_string(t.desc.op)), t.seq, -1};
  refuse_if_revoked(t);
  if (failure_) {
    throw_error(failure_->code(), fmt::format("the communicator is unusable after an earlier failure: {}", failure_->what()),
                ctx);
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
    if (abort_flag_.load()) throw_error(ErrorCode::aborted, "the communicator was aborted", ctx);
    if (signature_check_) {
      engine::OpIdentity check = id;
      check.phase = kSignaturePhase;
      run_schedule(schedule::signature_ring(size(), rank_), t.dtype, engine::Buffers{}, check, timeout);
    }
    const AlgoChoice choice = choose_algorithm(t);
    std::string algo = choice.name;
    if (algo == schedule::kDirectAlgorithm) {
      if (direct_runs_here(t.desc.op, reach())) {
        run_direct(t, timeout);
        ++ops_done_;
        return;
      }
      algo.clear();  // forced, not applicable here: the default
    }
    OpTask task = t;
    task.desc.nchannels = choice.nchannels;
    if (is_half_reduction(t.dtype, t.desc.op)) {
      run_half_precision(task, algo, id, timeout);
    } else {
      const auto s = schedule::build(algo, task.desc, rank_);
      run_schedule(s, t.dtype, engine::Buffers{t.send, t.recv, nullptr}, id, timeout);
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

void CommImpl::run_direct(const OpTask& t, std::chrono::milliseconds timeout) {
  if (!direct_) {
    direct::CommParams p;
    p.job_id = job_->job_id;
    p.comm_id = comm_id_;
    p.rank = rank_;
    p.nranks = size();
    for (const auto& peer : peers_) p.pids.push_back(static_cast<pid_t>(peer.pid));
    p.store = job_->store;
    p.spin = direct::SpinPolicy{engine_.config().spin, engine_.config().yield_while_spinning};
    direct_ = std::make_unique<direct::DirectComm>(std::move(p), waiter_, abort_flag_);
  }
  direct::Call c;
  c.op = t.desc.op;
  c.dtype = t.dtype;
  c.redop = t.desc.redop;
  c.count = t.desc.count;
  c.root = t.desc.root;
  c.send = t.send;
  c.recv = t.recv;
  c.seq = t.seq;
  HOOP_TRACE("{} #{}: {}", to_string(c.op), c.seq, schedule::kDirectAlgorithm);
  direct_->run(c, timeout);
  last_algorithm_ = schedule::kDirectAlgorithm;
}

void CommImpl::run_schedule(const schedule::RankSchedule& s, DataType elem, const engine::Buffers& bufs,
                            const engine::OpIdentity& id, std::chrono::milliseconds timeout) {
  engine::Buffers b = bufs;
  if (s.scratch_count > 0) b.scratch = scratch_.get(s.scratch_count * dtype_size(elem));
  HOOP_TRACE("{} #{}: {} ({} steps)", to_string(id.op), id.seq, s.algorithm, s.steps.size());
  engine_.run(s, elem, size(), b, id, timeout, counters_);
  last_algorithm_ = s.algorithm;
}

}  // namespace hoop::detail
