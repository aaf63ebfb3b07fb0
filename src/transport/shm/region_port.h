// This rank's end of a communicator's shared region: what the engine needs to run a schedule's
// shared-region actions (schedule.h: publish, wait_flag, read, read_reduce) and nothing of
// which algorithm produced them.
//
// Every operation on the region gets the next operation number (the same on every rank: all
// run the same operations in the same order) and the window of that parity. Before this rank
// writes into a window it was last used two operations ago; every peer must be done reading it
// (window_ready): it started the operation in between, or, when that operation's schedule ends
// with a closing publish (RankSchedule::closing_publish), it raised that last flag. The second
// spares a rank that finished an operation but is not running yet (more ranks than cores) from
// holding up its peers' next one. A flag value f of
// `peer` in the current operation is reached once its window header's flag word is at least
// flag_word(op, f); the words of earlier operations are smaller, so stale values never satisfy
// a wait. The largest word seen of each peer is kept, so a wait already known to be satisfied
// costs no read of the peer's line.
//
// Sleeping is a Dekker handshake with the publishers: the sleeper stores in `sleeping` which
// peer it waits for, reads `wake`, re-checks its condition and sleeps only if `wake` still
// holds what it read; a publisher stores its flag, fences, and bumps `wake` of every peer whose
// `sleeping` names it. No system call happens while the peers keep up, and no thread polls
// while idle. Only the publisher a sleeper waits for wakes it: a publish used to wake every
// sleeping rank of the host, each to find, mostly, that its own peer had not published yet and
// sleep again (on 128 ranks of 2 cores, up to 127 wake-ups a publish).
#pragma once

#include <sys/types.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "transport/shm/process_liveness.h"
#include "transport/shm/shared_region.h"
#include "transport/waiter.h"

namespace hoop::transport::shm {

class RegionPort {
 public:
  RegionPort(std::unique_ptr<SharedRegion> region, int rank, std::vector<pid_t> pids);
  ~RegionPort();
  RegionPort(const RegionPort&) = delete;
  RegionPort& operator=(const RegionPort&) = delete;

  int rank() const { return rank_; }
  int nranks() const { return region_->nranks(); }
  SharedRegion& region() const { return *region_; }
  size_t window_bytes() const { return region_->geometry().window_bytes; }

  // Starts the next operation: its number and window. Then wait until window_ready() holds for
  // every peer before writing the window, and announce() the call before the first publish.
  void begin_op();
  uint64_t op() const { return op_; }
  // Whether `peer` is done with this rank's window of the current operation (it started the
  // operation before, or this window was never used).
  bool window_ready(int peer) {
    if (op_ <= 2) return true;
    const Closing& c = closing_[window_];
    return (c.op == op_ - 2 && seen(peer, flag_word(c.op, c.flag))) || seen(peer, flag_word(op_ - 1, 1));
  }
  // Ends the current operation: `closing` says its schedule ended with a closing publish.
  void end_op(bool closing) { closing_[window_] = closing ? Closing{op_, flag_} : Closing{}; }
  // Writes the call and the buffers' addresses into this rank's window header: read by the
  // peers once its first publish shows. `registered`: how to map the input and output when they
  // are registered (null: they are not, or the schedule reads no peer's buffer).
  void announce(const CallSignature& call, const void* input, const void* output, uint8_t bits,
                const AnnouncedBuffer* registered = nullptr);

  // Raises this rank's flag by one and wakes the peers that sleep.
  void publish();
  uint32_t published() const { return flag_; }

  // Whether `peer`'s flag in the current operation reached `flag`.
  bool reached(int peer, uint32_t flag) { return seen(peer, flag_word(op_, flag)); }
  // The call `peer` announced for the current operation, once it published in it (nullopt
  // before), checked once per operation and peer by the engine.
  std::optional<CallSignature> peer_call(int peer) const;
  // Says which call this rank runs now, over links or the region: every operation of the
  // communicator declares it, so that ranks whose calls differ and took different paths (the
  // counts chose different algorithms) still compare them. declared(peer): what `peer`
  // declared last (nullopt while it writes, or before its first).
  void declare(const CallSignature& call);
  std::optional<CallSignature> declared(int peer) const;
  // Whether this operation's call of `peer` still needs comparing (and mark it compared).
  bool first_look(int peer) {
    uint64_t& c = compared_[static_cast<size_t>(peer)];
    if (c == op_) return false;
    c = op_;
    return true;
  }
  uint8_t peer_bits(int peer) const { return header(peer).bits; }

  // The windows of the current operation: this rank's, and a peer's (read only).
  std::byte* own_window() const { return region_->window(rank_, window_); }
  const std::byte* peer_window(int peer) const { return region_->window(peer, window_); }
  // Where `peer`'s input (or output) buffer is in its address space, as it announced it.
  uint64_t peer_buffer(int peer, bool output) const {
    const WindowHeader& h = header(peer);
    return output ? h.output_addr : h.input_addr;
  }
  // Where `peer`'s registered input (or output) buffer of this operation starts in this
  // process: the peer's pages mapped here (once, then kept). Null when the peer did not announce
  // it registered; throws peer_failure when it cannot be mapped.
  std::byte* peer_mapped(int peer, bool output);
  // Copies `bytes` from (to) `addr` in `peer`'s address space (process_vm_readv, _writev).
  // Returns 0, or the errno of a failure.
  int read_peer_memory(int peer, void* dst, uint64_t addr, size_t bytes) const;
  int write_peer_memory(int peer, uint64_t addr, const void* src, size_t bytes) const;
  pid_t pid_of(int peer) const { return pids_[static_cast<size_t>(peer)]; }

  // Sleeping until `peer` reaches `flag` (see above). arm() returns false when it already has.
  bool arm(Waiter& waiter, int peer, uint32_t flag);
  bool arm_window(Waiter& waiter, int peer);
  void disarm() { control(rank_).sleeping.store(kAwake, std::memory_order_relaxed); }
  // Whether a spinning wait on `peer` should give its core away: the peer last waited on this
  // rank's CPU (the scheduler put both there), so every spin delays the very write awaited.
  bool shares_cpu_with(int peer);

  bool alive(int peer);
  bool poisoned() const { return region_->poisoned(); }
  void poison(const std::string& reason) noexcept { region_->poison(rank_, reason); }

 private:
  RankControl& control(int r) const { return region_->control(r); }
  // RankControl::sleeping: kAwake, or the peer the owner sleeps until it publishes, plus one.
  static constexpr uint32_t kAwake = 0;
  static uint32_t sleeping_on(int peer) { return static_cast<uint32_t>(peer) + 1; }
  WindowHeader& header(int r) const { return region_->header(r, window_); }
  bool seen(int peer, uint64_t word) {
    uint64_t& s = seen_[static_cast<size_t>(peer)];
    if (s >= word) [[likely]] return true;
    // A word sits in the window of its operation's parity.
    const auto w = static_cast<unsigned>(op_of(word) & 1);
    s = std::max(s, region_->header(peer, w).flag.load(std::memory_order_acquire));
    return s >= word;
  }
  template <class Ready>
  bool arm_until(Waiter& waiter, int peer, const Ready& ready);
  void notify() noexcept;

  std::unique_ptr<SharedRegion> region_;
  int rank_;
  std::vector<pid_t> pids_;
  std::vector<ProcessLiveness> liveness_;
  uint64_t op_ = 0;
  unsigned window_ = 0;
  uint32_t flag_ = 0;
  struct Closing {
    uint64_t op = 0;  // 0: none
    uint32_t flag = 0;
  };
  Closing closing_[2];  // per window: the closing flag of the last operation that ended on it
  std::vector<uint64_t> seen_;      // per peer: the largest flag word read
  std::vector<uint64_t> compared_;  // per peer: the last operation whose call was compared
  // Peers' registered buffers mapped here, per peer, most recently used last (a few per peer:
  // a mapping keeps the peer's pages alive after it freed them, until it is dropped).
  struct PeerMapping {
    uint32_t id;
    std::byte* addr;
    uint64_t map_offset;
    uint64_t map_bytes;
  };
  static constexpr size_t kMappingsPerPeer = 16;
  std::vector<std::vector<PeerMapping>> mapped_;
  std::atomic<uint32_t> tsan_fence_word_{0};  // see notify()
};

// Whether every process of `pids` may read the others' memory with process_vm_readv: the same
// user, and no Yama restriction beyond the classic ptrace rules. The same answer on every rank
// of one machine (it reads the same files).
bool peers_can_read_each_other(const std::vector<pid_t>& pids);

}  // namespace hoop::transport::shm
