#include "engine/region_run.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "core/errors.h"
#include "engine/frame_check.h"
#include "engine/timeline.h"
#include "engine/wait_loop.h"
#include "kernels/copy.h"
#include "kernels/reduce.h"
#include "transport/shm/region_port.h"

namespace hoop::engine {

namespace {

using schedule::Action;
using schedule::ActionKind;
using schedule::Buf;
using transport::shm::RegionPort;

// What a reduction reads of a peer's own buffer (single copy) per process_vm_readv: large
// pieces (each call pins the peer's pages), small enough to stay in cache for the reduction.
constexpr size_t kBouncePiece = size_t{1} << 20;

// fused_fan_out's list of outputs, kept from one call to the next (no allocation per call).
std::vector<kernels::FanOut>& fan_outs() {
  thread_local std::vector<kernels::FanOut> outs;
  return outs;
}

class RegionRun {
 public:
  RegionRun(const RegionRunArgs& args, const schedule::RankSchedule& sched, DataType elem, int nranks,
            const Buffers& bufs, const OpIdentity& id, std::chrono::milliseconds stall_timeout,
            std::vector<PeerCounters>& counters)
      : args_(args),
        port_(args.port),
        bounce_(args.bounce),
        stall_timeout_(stall_timeout),
        sched_(sched),
        elem_(elem),
        esize_(dtype_size(elem)),
        nranks_(nranks),
        me_(id.rank),
        bufs_(bufs),
        id_(id),
        call_(call_signature(id)),
        counters_(counters) {
    if (counters_.size() < static_cast<size_t>(nranks)) counters_.resize(static_cast<size_t>(nranks));
  }

  void execute() {
    if (sched_.region_count * esize_ > port_.window_bytes()) {
      throw_error(ErrorCode::internal,
                  fmt::format("{} needs a window of {} bytes, the region has {}", sched_.algorithm,
                              sched_.region_count * esize_, port_.window_bytes()),
                  ctx(-1));
    }
    port_.begin_op();
    if (port_.poisoned()) port_.region().raise_poisoned(ctx(-1));
    for (int p = 0; p < nranks_; ++p) {
      if (p != me_ && !port_.window_ready(p)) wait_slow(p, 0, /*window=*/true);
    }
    run_steps(sched_.steps, 0);
    if (sched_.branch != schedule::BranchRule::none) {
      const size_t v = choose_variant();
      if (v < sched_.variants.size()) run_steps(sched_.variants[v], sched_.steps.size());
    }
    port_.end_op(sched_.closing_publish);
  }

 private:
  // A wait for a peer's flag (or for its start of the operation before: `window`), for
  // wait_loop.
  struct FlagWait {
    static constexpr int kPausesPerSpin = 1;
    static constexpr uint32_t kSpinsPerCheck = 64;
    RegionRun& run;
    int peer;
    uint32_t flag;
    bool window;
    bool ready = false;

    bool advance() {
      ready = window ? run.port_.window_ready(peer) : run.port_.reached(peer, flag);
      return ready;
    }
    bool done() const { return ready; }
    nanoseconds spin(const EngineConfig& cfg) const { return cfg.region_spin; }
    bool spin_yields() { return run.port_.shares_cpu_with(peer); }
    void check_health() {
      if (run.port_.poisoned()) run.port_.region().raise_poisoned(run.ctx(-1));
      // A peer that announced another call may never raise the flag awaited (its call takes
      // another path): a mismatch, not a timeout.
      if (!window) {
        if (auto theirs = run.port_.peer_call(peer)) run.compare_call(*theirs, peer);
      }
    }
    bool arm(transport::Waiter& w) { return window ? run.port_.arm_window(w, peer) : run.port_.arm(w, peer, flag); }
    void disarm() { run.port_.disarm(); }
    void check_liveness() {
      // A peer that runs this operation over links (its count chose another algorithm) never
      // publishes in it: the call it declared says so. Looked at here, after a sleep, not while
      // spinning: the peer rewrites that line at each operation, and reading it on the fast
      // path would take the line from its writer at every call.
      if (!window && !run.port_.peer_call(peer)) check_declared_call(run.port_.declared(peer), run.id_, peer);
      if (run.port_.alive(peer)) return;
      throw_error(ErrorCode::peer_failure,
                  fmt::format("rank {} (pid {}) has exited", peer, static_cast<int>(run.port_.pid_of(peer))),
                  run.ctx(peer));
    }
    int blamed_peer() const { return peer; }
    [[noreturn]] void raise_timeout(nanoseconds stalled) {
      const double secs = std::chrono::duration<double>(stalled).count();
      const std::string what =
          window ? std::string("start the operation before this one")
                 : fmt::format("raise its flag to {} (step {} of {})", flag, run.step_ + 1, run.total_steps());
      throw_error(ErrorCode::timeout,
                  fmt::format("timed out after {:.1f} s waiting for rank {} to {} (shm-direct)", secs, peer, what),
                  run.ctx(peer));
    }
  };

  ErrorContext ctx(int peer) const { return ErrorContext{id_.rank, std::string(to_string(id_.op)), id_.seq, peer}; }
  size_t total_steps() const {
    size_t longest = 0;
    for (const auto& v : sched_.variants) longest = std::max(longest, v.size());
    return sched_.steps.size() + longest;
  }

  void wait_slow(int peer, uint32_t flag, bool window) {
    FlagWait w{*this, peer, flag, window};
    wait_loop(w, WaitContext{args_.waiter, args_.abort, args_.cfg, stall_timeout_, args_.failure_probe, ctx(-1)});
  }

  // Returns once `peer` raised its flag to `flag` in this operation; the first time a peer is
  // seen in an operation, its call is compared with this rank's.
  void wait(int peer, uint32_t flag) {
    if (peer == me_ || flag == 0) return;
    if (!port_.reached(peer, flag)) [[unlikely]] wait_slow(peer, flag, false);
    if (port_.first_look(peer)) {
      if (auto theirs = port_.peer_call(peer)) compare_call(*theirs, peer);
    }
  }

  // Calls the same to the byte match; others may still (fields a collective ignores), and
  // check_same_call says.
  void compare_call(const transport::shm::CallSignature& theirs, int peer) const {
    if (!(theirs == call_)) [[unlikely]] check_same_call(theirs, id_, peer);
  }

  // Every rank's first publish carries what its call is like: all take the same variant.
  size_t choose_variant() {
    bool any_in_place = id_.in_place, all_registered = bufs_.all_registered;
    for (int p = 0; p < nranks_; ++p) {
      if (p == me_) continue;
      wait(p, 1);
      const uint8_t bits = port_.peer_bits(p);
      any_in_place = any_in_place || (bits & transport::shm::kInPlaceBit) != 0;
      all_registered = all_registered && (bits & transport::shm::kRegisteredBit) != 0;
    }
    return schedule::branch_variant(sched_.branch, any_in_place, all_registered);
  }

  std::byte* ptr(const schedule::Range& r) const { return bufs_.at(r, esize_, port_.own_window()); }

  // Where an action's remote range is, when this process can address it: this rank's own
  // memory, a peer's window, or a peer's registered buffer (mapped here). Null for a peer's
  // other buffers (moved through the kernel).
  std::byte* remote_ptr(const Action& a) {
    if (a.peer == me_) return ptr(a.remote);
    switch (a.remote.buf) {
      case Buf::region: return const_cast<std::byte*>(port_.peer_window(a.peer)) + a.remote.offset * esize_;
      case Buf::send:
      case Buf::recv: {
        std::byte* base = port_.peer_mapped(a.peer, a.remote.buf == Buf::recv);
        return base ? base + a.remote.offset * esize_ : nullptr;
      }
      case Buf::scratch: break;
    }
    throw_error(ErrorCode::internal, fmt::format("{}: a peer's scratch is not addressable", sched_.algorithm), ctx(a.peer));
  }
  uint64_t remote_addr(const Action& a) const {
    return port_.peer_buffer(a.peer, a.remote.buf == Buf::recv) + a.remote.offset * esize_;
  }

  // dst = src, around the caches where the schedule says the output is not read again soon.
  static void copy_bytes(std::byte* dst, const std::byte* src, size_t bytes, bool stream) {
    if (stream) kernels::copy_stream(dst, src, bytes);
    else std::memcpy(dst, src, bytes);
  }

  void write(const Action& a) {
    const size_t bytes = a.src.count * esize_;
    if (bytes == 0) return;
    const std::byte* src = ptr(a.src);
    if (std::byte* dst = remote_ptr(a)) {
      copy_bytes(dst, src, bytes, a.stream);
      return;
    }
    if (const int err = port_.write_peer_memory(a.peer, remote_addr(a), src, bytes); err != 0) {
      throw_system_error(ErrorCode::peer_failure,
                         fmt::format("shm-direct: cannot write rank {}'s buffer (pid {})", a.peer,
                                     static_cast<int>(port_.pid_of(a.peer))),
                         err, ctx(a.peer));
    }
  }

  void read_peer(int peer, void* dst, uint64_t addr, size_t bytes) {
    if (const int err = port_.read_peer_memory(peer, dst, addr, bytes); err != 0) {
      throw_system_error(ErrorCode::peer_failure,
                         fmt::format("shm-direct: cannot read rank {}'s buffer (pid {}); "
                                     "HOOP_DIRECT_SINGLE_COPY_BYTES=0 copies through shared memory instead",
                                     peer, static_cast<int>(port_.pid_of(peer))),
                         err, ctx(peer));
    }
  }

  void read(const Action& a) {
    const size_t bytes = a.dst.count * esize_;
    if (bytes == 0) return;
    std::byte* dst = ptr(a.dst);
    if (const std::byte* src = remote_ptr(a)) {
      if (src != dst) copy_bytes(dst, src, bytes, a.stream);
    } else {
      read_peer(a.peer, dst, remote_addr(a), bytes);
    }
  }

  void read_reduce(const Action& a) {
    const size_t count = a.dst.count;
    if (count == 0) return;
    std::byte* dst = ptr(a.dst);
    const std::byte* mine = ptr(a.src);
    if (const std::byte* theirs = remote_ptr(a)) {
      kernels::reduce(dst, mine, theirs, count, elem_, id_.redop);
      return;
    }
    // A peer's own buffer: through a bounce buffer, a piece at a time.
    const size_t piece = std::max<size_t>(kBouncePiece / esize_, 1);
    auto* tmp = static_cast<std::byte*>(bounce_.get(std::min(count, piece) * esize_));
    const uint64_t addr = remote_addr(a);
    for (size_t at = 0; at < count; at += piece) {
      const size_t n = std::min(piece, count - at);
      read_peer(a.peer, tmp, addr + at * esize_, n * esize_);
      kernels::reduce(dst + at * esize_, mine + at * esize_, tmp, n, elem_, id_.redop);
    }
  }

  void run_action(const Action& a) {
    switch (a.kind) {
      case ActionKind::copy:
        if (a.src.count > 0 && ptr(a.src) != ptr(a.dst)) {
          if (a.stream) kernels::copy_stream(ptr(a.dst), ptr(a.src), a.src.count * esize_);
          else std::memmove(ptr(a.dst), ptr(a.src), a.src.count * esize_);
        }
        return;
      case ActionKind::finish_avg: kernels::finish_avg(ptr(a.dst), a.dst.count, elem_, nranks_); return;
      case ActionKind::publish:
        // The call goes out with the first publish, written right before it: a peer polling
        // this line sees it change once.
        if (port_.published() == 0) {
          const uint8_t bits = (id_.in_place ? transport::shm::kInPlaceBit : 0) |
                               (bufs_.all_registered ? transport::shm::kRegisteredBit : 0);
          port_.announce(call_, bufs_.send, bufs_.recv, bits, bufs_.registered);
        }
        if (port_.published() >= transport::shm::kMaxFlag) {
          throw_error(ErrorCode::internal, fmt::format("{}: too many publishes in one operation", sched_.algorithm),
                      ctx(-1));
        }
        port_.publish();
        return;
      case ActionKind::wait_flag: wait(a.peer, a.flag); return;
      case ActionKind::read:
        wait(a.peer, a.flag);
        read(a);
        break;
      case ActionKind::read_reduce:
        wait(a.peer, a.flag);
        read_reduce(a);
        break;
      case ActionKind::write:
        wait(a.peer, a.flag);
        write(a);
        break;
      default:
        throw_error(ErrorCode::internal,
                    fmt::format("{}: a schedule of the shared region holds a send or receive", sched_.algorithm),
                    ctx(a.peer));
    }
    count_moved(a);
  }

  // CommStats: the bytes a read, a read_reduce or a write moved from or to another rank.
  void count_moved(const Action& a) {
    if (a.peer == me_ || a.peer < 0 || a.kind == ActionKind::copy) return;
    PeerCounters& c = counters_[static_cast<size_t>(a.peer)];
    if (a.kind == ActionKind::write) c.sent += a.src.count * esize_;
    else c.received += a.dst.count * esize_;
  }

  static bool same_range(const schedule::Range& x, const schedule::Range& y) {
    return x.buf == y.buf && x.offset == y.offset && x.count == y.count;
  }

  // A reduction's first two inputs (a `read` of X then a `read_reduce` of X with a second input
  // into X) in one pass, X = op(first, second), where both are in memory this process
  // addresses: the first input is not copied on its own. Returns whether it did (then both
  // actions are done).
  bool fused_first_pair(const Action& a, const Action* next) {
    if (a.kind != ActionKind::read || !next || next->kind != ActionKind::read_reduce || a.dst.count == 0 ||
        !same_range(next->src, a.dst) || !same_range(next->dst, a.dst)) {
      return false;
    }
    const std::byte* first = remote_ptr(a);
    const std::byte* second = remote_ptr(*next);
    if (!first || !second) return false;
    wait(a.peer, a.flag);
    wait(next->peer, next->flag);
    kernels::reduce(ptr(a.dst), first, second, a.dst.count, elem_, id_.redop);
    count_moved(a);
    count_moved(*next);
    return true;
  }

  // A reduction's last input (a `read_reduce`, or the fused first pair when there are two)
  // followed by copies of its result to outputs (`write` to peers' buffers this process maps,
  // `copy` to its own): reduced and copied a block at a time (kernels::reduce_fan_out), so that
  // the outputs are written while the inputs are read rather than in passes over the whole
  // result after it. Returns how many actions it ran (0: the pattern is not here).
  size_t fused_fan_out(const std::vector<Action>& actions, size_t i) {
    const Action& a = actions[i];
    const Action* pair = nullptr;  // the first pair's second action, when fused
    if (a.kind == ActionKind::read && i + 1 < actions.size()) {
      const Action& b = actions[i + 1];
      if (b.kind != ActionKind::read_reduce || !same_range(b.src, a.dst) || !same_range(b.dst, a.dst)) return 0;
      pair = &b;
    } else if (a.kind != ActionKind::read_reduce) {
      return 0;
    }
    const schedule::Range& result = a.dst;
    const size_t tail = i + (pair ? 2 : 1);  // the first copy of the result
    size_t end = tail;
    bool writes_to_peer = false, all_streamed = true;
    for (; end < actions.size(); ++end) {
      const Action& w = actions[end];
      if ((w.kind != ActionKind::write && w.kind != ActionKind::copy) || !same_range(w.src, result)) break;
      writes_to_peer = writes_to_peer || (w.kind == ActionKind::write && w.peer != me_);
      all_streamed = all_streamed && w.stream;
    }
    // Only where the outputs go around the caches to peers' buffers (zero copy, large): in
    // cache, and for the slots' copies, the blocks measured slower than the passes.
    if (end == tail || result.count == 0 || !writes_to_peer || !all_streamed) return 0;
    // Where the peers' buffers are is known once they published: wait first.
    for (size_t k = i; k < end; ++k) wait(actions[k].peer, actions[k].flag);
    const std::byte* first = pair ? remote_ptr(a) : ptr(a.src);
    const std::byte* second = remote_ptr(pair ? *pair : a);
    if (!first || !second) return 0;
    outs_.clear();
    for (size_t k = tail; k < end; ++k) {
      const Action& w = actions[k];
      std::byte* dst = w.kind == ActionKind::write ? remote_ptr(w) : ptr(w.dst);
      if (!dst) return 0;  // through the kernel: action by action
      if (dst != ptr(result)) outs_.push_back(kernels::FanOut{dst, w.stream});
    }
    kernels::reduce_fan_out(ptr(result), first, second, result.count, elem_, id_.redop, outs_.data(), outs_.size());
    for (size_t k = i; k < end; ++k) count_moved(actions[k]);
    return end - i;
  }

  void run_steps(const std::vector<schedule::Step>& steps, size_t first) {
    for (size_t k = 0; k < steps.size(); ++k) {
      step_ = first + k;
      const auto& actions = steps[k].actions;
      const size_t n = actions.size();
      for (size_t i = 0; i < n; ++i) {
        const Action& a = actions[i];
        const Action* next = i + 1 < n ? &actions[i + 1] : nullptr;
        if (timeline_) [[unlikely]] {
          i += traced(a, next);
        } else if (const size_t ran = fused_fan_out(actions, i)) {
          i += ran - 1;
        } else if (fused_first_pair(a, next)) {
          ++i;
        } else {
          run_action(a);
        }
      }
    }
  }

  size_t moved_bytes(const Action& a) const {
    if (a.kind == ActionKind::publish || a.kind == ActionKind::wait_flag) return 0;
    return (a.kind == ActionKind::write ? a.src.count : a.dst.count) * esize_;
  }

  // run_action (or the fused pair) recorded on the timeline; returns whether the pair was fused.
  bool traced(const Action& a, const Action* next) {
    const int64_t start = Timeline::now_ns();
    const bool fused = fused_first_pair(a, next);
    if (!fused) run_action(a);
    const int64_t end = Timeline::now_ns();
    for (const Action* x : {&a, fused ? next : nullptr}) {
      if (!x) continue;
      timeline_->record_action(id_, step_, *x, moved_bytes(*x), start, end);
    }
    return fused;
  }

  const RegionRunArgs& args_;
  RegionPort& port_;
  ScratchPool& bounce_;
  std::chrono::milliseconds stall_timeout_;
  const schedule::RankSchedule& sched_;
  DataType elem_;
  size_t esize_;
  int nranks_;
  int me_;
  Buffers bufs_;
  const OpIdentity& id_;
  const transport::shm::CallSignature call_;
  std::vector<PeerCounters>& counters_;
  Timeline* timeline_ = Timeline::global();
  size_t step_ = 0;
  std::vector<kernels::FanOut>& outs_ = fan_outs();  // fused_fan_out's outputs
};

}  // namespace

void run_region_schedule(const RegionRunArgs& args, const schedule::RankSchedule& sched, DataType elem, int nranks,
                         const Buffers& bufs, const OpIdentity& id, std::chrono::milliseconds stall_timeout,
                         std::vector<PeerCounters>& counters) {
  RegionRun(args, sched, elem, nranks, bufs, id, stall_timeout, counters).execute();
}

}  // namespace hoop::engine
