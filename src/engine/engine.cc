#include "engine/engine.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <span>
#include <utility>

#include "core/errors.h"
#include "core/log.h"
#include "core/params.h"
#include "engine/frame_check.h"
#include "engine/region_run.h"
#include "engine/timeline.h"
#include "engine/wait_loop.h"
#include "kernels/reduce.h"
#include "transport/frame.h"
#include "transport/shm/region_port.h"

namespace hoop::engine {

using schedule::Action;
using schedule::ActionKind;
using schedule::Buf;
using transport::FrameHeader;
using transport::padded_size;

EngineConfig config_from_env(int machine_ranks) {
  EngineConfig cfg;
  cfg.slice_bytes = std::max<uint64_t>(params::bytes(params::Id::slice_bytes), 4096);
  const long cores = ::sysconf(_SC_NPROCESSORS_ONLN);
  // With more ranks than cores a waiting rank yields the core while it spins. A wait on a peer's
  // flag in the shared region does not spin at all: the peers it waits for are doing the work
  // (copies, reductions) and need the cores. A wait on a link spins before it sleeps, yielding:
  // a link's transfers chain the ranks one after the other (a pipelined chain or ring), and a
  // rank that went to sleep at each hop waits for the scheduler to wake it. On 8 ranks over 2
  // cores, a 16-256 KiB chain Reduce took 3-8x longer sleeping at once, its median swinging
  // from 4 to 100 us between runs. On TCP the spin is longer (1 ms): a sleeper is woken by the
  // kernel when the packet lands, one rank after the other, while a rank that yields is back as
  // soon as the others on its core yield or block; on the lab's 8 ranks over 2 cores, 1-16 KiB
  // AllReduces took 1.2-3.4x longer sleeping at once.
  const bool oversubscribed = cores > 0 && machine_ranks > cores;
  cfg.yield_while_spinning = oversubscribed;
  const auto spin_us = params::integer_if_set(params::Id::spin_us);
  const int64_t fallback = params::integer(params::Id::spin_us);
  const auto spin = [&](int64_t oversubscribed_us) {
    return std::chrono::microseconds(spin_us ? *spin_us : oversubscribed ? oversubscribed_us : fallback);
  };
  cfg.spin = spin(kOversubscribedLinkSpinUs);
  cfg.network_spin = spin(kOversubscribedNetworkSpinUs);
  cfg.region_spin = spin(0);
  return cfg;
}

void spin_once(const EngineConfig& cfg, bool hold) {
  if (cfg.yield_while_spinning && !hold) ::sched_yield();
  else for (int k = 0; k < 64; ++k) __builtin_ia32_pause();
}

Engine::Engine(LinkGetter get_link, transport::Waiter& waiter, const std::atomic<bool>& abort_flag,
               EngineConfig cfg)
    : get_link_(std::move(get_link)), waiter_(waiter), abort_(abort_flag), cfg_(cfg) {}

namespace {

alignas(8) const std::byte kZeros[8] = {};
// The sends considered for one gathered write: each brings its data and its padding.
constexpr size_t kMaxGathered = (transport::kMaxWriteParts - 1) / 2;

// The per-operation state of one peer's link: the header each way and the bytes each way.
struct PeerState {
  transport::Link* link = nullptr;
  uint64_t tx_total = 0;  // payload bytes this op sends to the peer (padding excluded)
  uint64_t rx_total = 0;
  bool sends = false, receives = false;
  FrameHeader tx_header;
  size_t tx_header_done = 0;
  FrameHeader rx_header;
  size_t rx_header_done = 0;
  bool rx_header_checked = false;
};

struct Progress {
  size_t data_bytes = 0;
  size_t data_done = 0;
  size_t pad_done = 0;
  bool complete = false;
  bool noted = false;  // counted as finished (and traced)
  size_t pad() const { return padded_size(data_bytes) - data_bytes; }
};

class Run {
 public:
  Run(const Engine::LinkGetter& get_link, transport::Waiter& waiter, const std::atomic<bool>& abort,
      const EngineConfig& cfg, const schedule::RankSchedule& sched, DataType elem, int nranks,
      const Buffers& bufs, const OpIdentity& id, std::chrono::milliseconds stall_timeout,
      std::vector<PeerCounters>& counters, const Engine::FailureProbe& failure_probe,
      transport::shm::RegionPort* board)
      : get_link_(get_link), waiter_(waiter), abort_(abort), cfg_(cfg), sched_(sched), elem_(elem),
        esize_(dtype_size(elem)), nranks_(nranks), bufs_(bufs), id_(id),
        stall_timeout_(stall_timeout), counters_(counters), failure_probe_(failure_probe), board_(board) {
    if (counters_.size() < static_cast<size_t>(nranks)) counters_.resize(static_cast<size_t>(nranks));
    for (const auto& step : sched_.steps) {
      for (const Action& a : step.actions) nchannels_ = std::max(nchannels_, a.channel + 1);
    }
    peers_.resize(static_cast<size_t>(nranks) * static_cast<size_t>(nchannels_));
  }

  void execute() {
    plan_links();
    for (step_ = 0; step_ < sched_.steps.size(); ++step_) run_step(sched_.steps[step_]);
  }

  int current_peer() const { return waiting_peer_; }

 private:
  std::byte* ptr(const schedule::Range& r) const { return bufs_.at(r, esize_); }  // no region: refused by plan_links

  // The state of the link an action uses: one per (peer, channel).
  size_t slot(const Action& a) const {
    return static_cast<size_t>(a.peer) * static_cast<size_t>(nchannels_) + static_cast<size_t>(a.channel);
  }

  // Totals per link for the headers, then connect every link the schedule uses.
  void plan_links() {
    const TimePoint deadline = Clock::now() + stall_timeout_;
    for (const auto& step : sched_.steps) {
      for (const Action& a : step.actions) {
        if (schedule::is_region_action(a.kind)) {
          throw_error(ErrorCode::internal,
                      fmt::format("{}: shared-region actions do not run over links", sched_.algorithm), ctx(-1));
        }
        if (a.kind == ActionKind::send) {
          auto& p = peers_.at(slot(a));
          p.sends = true;
          p.tx_total += a.src.count * esize_;
        } else if (a.kind == ActionKind::recv_copy || a.kind == ActionKind::recv_reduce) {
          auto& p = peers_.at(slot(a));
          p.receives = true;
          p.rx_total += a.dst.count * esize_;
        }
      }
    }
    for (size_t i = 0; i < peers_.size(); ++i) {
      PeerState& p = peers_[i];
      if (!p.sends && !p.receives) continue;
      const int peer = static_cast<int>(i / static_cast<size_t>(nchannels_));
      waiting_peer_ = peer;
      p.link = &get_link_(peer, static_cast<int>(i % static_cast<size_t>(nchannels_)), deadline);
      p.tx_header = make_header(id_, p.tx_total);
    }
    waiting_peer_ = -1;
  }

  void run_local(const Action& a) {
    if (a.kind == ActionKind::copy) {
      if (a.src.count > 0 && ptr(a.src) != ptr(a.dst)) {
        std::memmove(ptr(a.dst), ptr(a.src), a.src.count * esize_);
      }
    } else if (a.kind == ActionKind::finish_avg) {
      kernels::finish_avg(ptr(a.dst), a.dst.count, elem_, nranks_);
    }
  }

  void run_step(const schedule::Step& step) {
    const size_t n = step.actions.size();
    progress_.assign(n, Progress{});
    link_next_sends(step);
    size_t pending = 0;
    step_start_ns_ = timeline_ ? Timeline::now_ns() : 0;
    for (size_t i = 0; i < n; ++i) {
      const Action& a = step.actions[i];
      if (a.kind == ActionKind::copy || a.kind == ActionKind::finish_avg) {
        run_local(a);
        progress_[i].complete = true;
        if (timeline_) {
          timeline_->record_action(id_, step_, a, a.dst.count * esize_, step_start_ns_, Timeline::now_ns());
        }
      } else {
        progress_[i].data_bytes = (a.kind == ActionKind::send ? a.src.count : a.dst.count) * esize_;
        ++pending;
      }
    }
    StepWait w{*this, step, pending};
    wait_loop(w, WaitContext{waiter_, abort_, cfg_, stall_timeout_, failure_probe_, ctx(-1)});
  }

  // A step's transfers, for wait_loop: every pass moves what the links take and give.
  struct StepWait {
    // A pass over the step's links is itself the pause (a system call per TCP link); the
    // clock is read after each.
    static constexpr int kPausesPerSpin = 0;
    static constexpr uint32_t kSpinsPerCheck = 1;
    Run& run;
    const schedule::Step& step;
    size_t& pending;
    int network = -1;  // waits_on_network, once asked

    bool advance() {
      size_t finished = 0;
      const bool moved = run.pass(step, &finished);
      pending -= finished;
      return moved;
    }
    bool done() const { return pending == 0; }
    nanoseconds spin(const EngineConfig& cfg) {
      if (network < 0) network = run.waits_on_network(step) ? 1 : 0;
      return network ? cfg.network_spin : cfg.spin;
    }
    bool spin_yields() const { return false; }
    void check_health() {}
    bool arm(transport::Waiter& w) { return run.arm_links(step, w); }
    void disarm() { run.disarm_links(); }
    void check_liveness() { run.check_liveness(step); }
    int blamed_peer() const {
      const size_t i = run.blamed_action(step);
      return i < step.actions.size() ? step.actions[i].peer : -1;
    }
    [[noreturn]] void raise_timeout(nanoseconds stalled) { run.throw_timeout(step, stalled); }
  };

  // Whether a transfer of the step not complete yet goes over a TCP link.
  bool waits_on_network(const schedule::Step& step) const {
    for (size_t i = 0; i < step.actions.size(); ++i) {
      if (progress_[i].complete) continue;
      const transport::Link* link = peers_[slot(step.actions[i])].link;
      if (link && link->kind() == "tcp") return true;
    }
    return false;
  }

  // One non-blocking sweep over the step's transfers. Returns whether any byte moved.
  bool pass(const schedule::Step& step, size_t* finished) {
    bool moved = false;
    // Actions on one peer and direction run in order: a link is taken by its first transfer
    // not yet complete. The sends that follow it on the link go with it (advance_sends).
    tx_busy_.assign(peers_.size(), false);
    rx_busy_.assign(peers_.size(), false);
    for (size_t i = 0; i < step.actions.size(); ++i) {
      const Action& a = step.actions[i];
      if (progress_[i].complete) continue;
      const size_t peer = slot(a);
      if (a.kind == ActionKind::send) {
        if (tx_busy_[peer]) continue;
        tx_busy_[peer] = true;
        run_.clear();
        for (int j = static_cast<int>(i); j >= 0 && run_.size() < kMaxGathered; j = next_send_[static_cast<size_t>(j)]) {
          run_.push_back(static_cast<size_t>(j));
        }
        moved |= advance_sends(step, run_);
        for (size_t j : run_) note_if_complete(step, j, finished);
      } else {
        if (rx_busy_[peer]) continue;
        moved |= advance_recv(a, progress_[i]);
        note_if_complete(step, i, finished);
        // A receive that completed frees its link for the next one in this sweep: the peer's
        // gathered sends are often in the buffer already.
        rx_busy_[peer] = !progress_[i].complete;
      }
    }
    return moved;
  }

  // next_send_[i]: the step's next send on send i's link (-1: none), so that pass() finds a
  // link's sends without searching the step.
  void link_next_sends(const schedule::Step& step) {
    next_send_.assign(step.actions.size(), -1);
    last_send_.assign(peers_.size(), -1);
    for (size_t i = step.actions.size(); i-- > 0;) {
      const Action& a = step.actions[i];
      if (a.kind != ActionKind::send) continue;
      int& last = last_send_[slot(a)];
      next_send_[i] = last;
      last = static_cast<int>(i);
    }
  }

  void note_if_complete(const schedule::Step& step, size_t i, size_t* finished) {
    Progress& pr = progress_[i];
    if (!pr.complete || pr.noted) return;
    pr.noted = true;
    ++*finished;
    if (timeline_) timeline_->record_action(id_, step_, step.actions[i], pr.data_bytes, step_start_ns_, Timeline::now_ns());
  }

  // The step's sends on one link, in order (`run`: their indices, the first not complete):
  // what is left of the link's header and of each send's data and padding, gathered into one
  // write while each send ends within it and the slice is not full, so that a step's several
  // small blocks to one peer (Bruck's) cost one system call and one wake-up of the peer.
  bool advance_sends(const schedule::Step& step, std::span<const size_t> run) {
    PeerState& p = peers_[slot(step.actions[run[0]])];
    waiting_peer_ = step.actions[run[0]].peer;
    bool moved = false;
    for (;;) {
      // What each part of the write advances: the header (null) or a send's data or padding.
      struct Piece {
        Progress* pr;
        bool data;
        int peer;
      };
      transport::WritePart parts[transport::kMaxWriteParts];
      Piece pieces[transport::kMaxWriteParts];
      size_t n = 0, gathered = 0;
      const size_t header_left = sizeof(FrameHeader) - p.tx_header_done;
      if (header_left > 0) {
        pieces[n] = {nullptr, false, -1};
        parts[n++] = {reinterpret_cast<const std::byte*>(&p.tx_header) + p.tx_header_done, header_left};
      }
      for (size_t idx : run) {
        Progress& pr = progress_[idx];
        if (pr.complete) continue;
        if (n + 2 > transport::kMaxWriteParts) break;
        const Action& a = step.actions[idx];
        size_t limit = pr.data_bytes;
        if (a.after >= 0) limit = std::min(limit, progress_[static_cast<size_t>(a.after)].data_done);
        const size_t room = cfg_.slice_bytes - gathered;
        const size_t data_left = limit > pr.data_done ? std::min(limit - pr.data_done, room) : 0;
        if (data_left > 0) {
          pieces[n] = {&pr, true, a.peer};
          parts[n++] = {ptr(a.src) + pr.data_done, data_left};
          gathered += data_left;
        }
        const bool ends = pr.data_done + data_left == pr.data_bytes;
        const size_t pad_left = ends ? pr.pad() - pr.pad_done : 0;
        if (pad_left > 0) {
          pieces[n] = {&pr, false, a.peer};
          parts[n++] = {kZeros, pad_left};
        }
        // The next send's bytes follow this one's on the link only once this one has ended.
        if (!ends || gathered >= cfg_.slice_bytes) break;
      }
      if (n == 0) break;
      size_t w = p.link->write_parts({parts, n});
      if (w == 0) break;
      moved = true;
      bool all = true;
      for (size_t k = 0; k < n; ++k) {
        const size_t took = std::min(w, parts[k].size);
        w -= took;
        if (!pieces[k].pr) {
          p.tx_header_done += took;
        } else if (pieces[k].data) {
          pieces[k].pr->data_done += took;
          counters_[static_cast<size_t>(pieces[k].peer)].sent += took;
        } else {
          pieces[k].pr->pad_done += took;
        }
        if (took < parts[k].size) all = false;
      }
      if (!all) break;  // the link is full for now
    }
    for (size_t idx : run) {
      Progress& pr = progress_[idx];
      // An empty send (a barrier's) is complete only once its link's header is out.
      pr.complete = p.tx_header_done == sizeof(FrameHeader) && pr.data_done == pr.data_bytes &&
                    pr.pad_done == pr.pad();
    }
    return moved;
  }

  bool advance_recv(const Action& a, Progress& pr) {
    PeerState& p = peers_[slot(a)];
    waiting_peer_ = a.peer;
    bool moved = false;
    if (!p.rx_header_checked) {
      auto span = p.link->readable();
      if (span.empty()) return false;
      const size_t take = std::min(span.size(), sizeof(FrameHeader) - p.rx_header_done);
      std::memcpy(reinterpret_cast<std::byte*>(&p.rx_header) + p.rx_header_done, span.data(), take);
      p.link->consume(take);
      p.rx_header_done += take;
      moved = true;
      if (p.rx_header_done < sizeof(FrameHeader)) return moved;
      check_header(p.rx_header, id_, a.peer, p.rx_total, esize_);
      p.rx_header_checked = true;
    }
    std::byte* dst = ptr(a.dst);
    const bool reduce = a.kind == ActionKind::recv_reduce;
    const std::byte* local = reduce ? ptr(a.src) : nullptr;
    while (pr.data_done < pr.data_bytes) {
      auto span = p.link->readable();
      size_t take = std::min(span.size(), pr.data_bytes - pr.data_done);
      if (reduce) take -= take % esize_;
      if (take == 0) break;
      if (reduce) {
        const std::byte* mine = local + pr.data_done;
        const std::byte* theirs = span.data();
        if (a.received_first) std::swap(mine, theirs);  // dst = op(received, local)
        kernels::reduce(dst + pr.data_done, mine, theirs, take / esize_, elem_, id_.redop);
      } else {
        std::memcpy(dst + pr.data_done, span.data(), take);
      }
      p.link->consume(take);
      pr.data_done += take;
      counters_[static_cast<size_t>(a.peer)].received += take;
      moved = true;
    }
    while (pr.data_done == pr.data_bytes && pr.pad_done < pr.pad()) {
      auto span = p.link->readable();
      const size_t take = std::min(span.size(), pr.pad() - pr.pad_done);
      if (take == 0) break;
      p.link->consume(take);
      pr.pad_done += take;
      moved = true;
    }
    pr.complete = pr.data_done == pr.data_bytes && pr.pad_done == pr.pad();
    return moved;
  }

  // Registers on the Waiter what the pending transfers wait for; false when a link is ready
  // already (then nothing was left armed to sleep on).
  bool arm_links(const schedule::Step& step, transport::Waiter& waiter) {
    want_read_.assign(peers_.size(), false);
    want_write_.assign(peers_.size(), false);
    for (size_t i = 0; i < step.actions.size(); ++i) {
      const Action& a = step.actions[i];
      const Progress& pr = progress_[i];
      if (pr.complete || a.peer < 0) continue;
      const size_t peer = slot(a);
      if (a.kind == ActionKind::send) {
        // A forwarding send waiting for its data waits on the receive, not on the link.
        const bool data_ready = a.after < 0 || progress_[static_cast<size_t>(a.after)].data_done > pr.data_done ||
                                pr.data_done == pr.data_bytes;
        if (data_ready) want_write_[peer] = true;
      } else {
        want_read_[peer] = true;
      }
    }
    armed_.clear();
    for (size_t idx = 0; idx < peers_.size(); ++idx) {
      if (!want_read_[idx] && !want_write_[idx]) continue;
      transport::Link* link = peers_[idx].link;
      armed_.push_back(link);
      if (!link->arm(waiter, want_read_[idx], want_write_[idx])) return false;
    }
    return true;
  }

  void disarm_links() {
    for (auto* link : armed_) link->disarm();
    armed_.clear();
  }

  void check_liveness(const schedule::Step& step) {
    for (size_t i = 0; i < step.actions.size(); ++i) {
      const Action& a = step.actions[i];
      if (progress_[i].complete || a.peer < 0) continue;
      waiting_peer_ = a.peer;
      peers_[slot(a)].link->check_peer_alive();
      // A peer that runs another call of this operation (its count chose another path) sends
      // nothing this wait would read: its declared call says so.
      if (board_) check_declared_call(board_->declared(a.peer), id_, a.peer);
    }
  }

  // The first peer this step waits to hear from, else the first it cannot send to (null: none).
  size_t blamed_action(const schedule::Step& step) const {
    for (int pass_kind = 0; pass_kind < 2; ++pass_kind) {
      for (size_t i = 0; i < step.actions.size(); ++i) {
        const Action& a = step.actions[i];
        const bool is_recv = a.kind == ActionKind::recv_copy || a.kind == ActionKind::recv_reduce;
        if (progress_[i].complete || a.peer < 0 || is_recv != (pass_kind == 0)) continue;
        return i;
      }
    }
    return step.actions.size();
  }

  [[noreturn]] void throw_timeout(const schedule::Step& step, nanoseconds stalled) {
    const size_t i = blamed_action(step);
    const Action* blame = i < step.actions.size() ? &step.actions[i] : nullptr;
    const Progress* blame_pr = blame ? &progress_[i] : nullptr;
    const double secs = std::chrono::duration<double>(stalled).count();
    if (!blame) throw_error(ErrorCode::timeout, fmt::format("no progress for {:.1f} s", secs), ctx(-1));
    const bool is_recv = blame->kind != ActionKind::send;
    const PeerState& p = peers_[slot(*blame)];
    std::string what;
    if (is_recv && !p.rx_header_checked) {
      what = fmt::format("waiting for rank {} to join the operation (no message from it)", blame->peer);
    } else {
      what = fmt::format("waiting for rank {} to {} ({} of {} bytes of step {} of {})", blame->peer,
                         is_recv ? "send data" : "take data", blame_pr->data_done,
                         blame_pr->data_bytes, step_ + 1, sched_.steps.size());
    }
    throw_error(ErrorCode::timeout, fmt::format("timed out after {:.1f} s {}", secs, what),
                ctx(blame->peer));
  }

  ErrorContext ctx(int peer) const {
    return ErrorContext{id_.rank, std::string(to_string(id_.op)), id_.seq, peer};
  }

  const Engine::LinkGetter& get_link_;
  transport::Waiter& waiter_;
  const std::atomic<bool>& abort_;
  const EngineConfig& cfg_;
  const schedule::RankSchedule& sched_;
  DataType elem_;
  size_t esize_;
  int nranks_;
  Buffers bufs_;
  OpIdentity id_;
  std::chrono::milliseconds stall_timeout_;
  std::vector<PeerCounters>& counters_;
  const Engine::FailureProbe& failure_probe_;
  transport::shm::RegionPort* board_;  // where the peers declare their calls (null: no region open)
  Timeline* timeline_ = Timeline::global();
  int64_t step_start_ns_ = 0;
  int nchannels_ = 1;
  std::vector<PeerState> peers_;  // per (peer, channel): see slot()
  std::vector<Progress> progress_;
  std::vector<bool> tx_busy_, rx_busy_, want_read_, want_write_;
  std::vector<size_t> run_;  // scratch of pass(): the sends of one link
  std::vector<transport::Link*> armed_;  // the links arm_links() registered
  std::vector<int> next_send_, last_send_;  // see link_next_sends()
  size_t step_ = 0;
  int waiting_peer_ = -1;
};

}  // namespace

void Engine::run(const schedule::RankSchedule& sched, DataType elem, int nranks, const Buffers& bufs,
                 const OpIdentity& id, std::chrono::milliseconds stall_timeout,
                 std::vector<PeerCounters>& counters) {
  Timeline* timeline = Timeline::global();
  const int64_t start = timeline ? Timeline::now_ns() : 0;
  int peer = -1;  // the peer a link schedule waited on when it failed
  try {
    if (sched.shared_region) {
      if (!get_region_) throw_error(ErrorCode::internal, fmt::format("{}: this engine has no shared region", sched.algorithm));
      transport::shm::RegionPort& port = get_region_(stall_timeout);
      port.declare(call_signature(id));
      run_region_schedule(RegionRunArgs{port, waiter_, abort_, cfg_, failure_probe_, bounce_}, sched, elem, nranks,
                          bufs, id, stall_timeout, counters);
    } else {
      transport::shm::RegionPort* board = open_region_ ? open_region_() : nullptr;
      if (board) board->declare(call_signature(id));
      run_links(sched, elem, nranks, bufs, id, stall_timeout, counters, board, peer);
    }
    if (timeline) timeline->record_op(id, sched.algorithm, start, Timeline::now_ns());
  } catch (const Error& e) {
    if (e.seq() == id.seq && e.op() == to_string(id.op)) throw;
    // Errors raised by links or by opening the region lack the operation: add it.
    throw Error(e.code(), e.detail(),
                ErrorContext{id.rank, std::string(to_string(id.op)), id.seq, e.peer() >= 0 ? e.peer() : peer});
  }
}

// Out of line: a link schedule's state is large, and the shared region's path (most calls on
// one host) should not set it up.
void Engine::run_links(const schedule::RankSchedule& sched, DataType elem, int nranks, const Buffers& bufs,
                       const OpIdentity& id, std::chrono::milliseconds stall_timeout,
                       std::vector<PeerCounters>& counters, transport::shm::RegionPort* board,
                       int& failed_peer) {
  Run links(get_link_, waiter_, abort_, cfg_, sched, elem, nranks, bufs, id, stall_timeout, counters, failure_probe_,
            board);
  try {
    links.execute();
  } catch (const Error&) {
    failed_peer = links.current_peer();
    throw;
  }
}

}  // namespace hoop::engine
