// A communicator: a group of ranks that run collectives together.
//
// Collectives run in the order they are issued on each communicator, by a progress engine
// (point-to-point calls progress on their own, see below); the blocking calls return when this
// rank's part is done, the *_async ones return a Work handle at once. Several communicators may be used at the same time (from different threads).
// Buffer conventions follow NCCL: ReduceScatter in place reads recv == send + rank*recvcount;
// AllGather in place has send == recv + rank*sendcount.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "hoop/error.h"
#include "hoop/export.h"
#include "hoop/store.h"
#include "hoop/types.h"

namespace hoop {

namespace detail {
class WorkState;
class CommImpl;
struct CommAccess;
}  // namespace detail

struct CommOptions {
  // Stall timeout of every wait: an operation fails when it makes no progress for this long.
  // Default: HOOP_TIMEOUT (seconds), else `fallback_timeout`, else 300 s.
  std::optional<std::chrono::milliseconds> timeout;
  // The timeout of the framework hoop runs under (torch's init_process_group(timeout=...)):
  // it applies when neither `timeout` nor HOOP_TIMEOUT is given.
  std::optional<std::chrono::milliseconds> fallback_timeout;
  // "auto" (shared memory between ranks of one host, TCP between hosts), "shm" or "tcp".
  // Default: HOOP_TRANSPORT or "auto".
  std::optional<std::string> transport;
};

struct OpOptions {
  // Overrides the communicator's timeout for this operation.
  std::optional<std::chrono::milliseconds> timeout;
  // Forces an algorithm ("ring", "chain", ...); empty: HOOP_ALGO or the tuner.
  std::string algo;
};

// Point-to-point matching, as MPI: a receive names a source rank or kAnySource and a tag or
// kAnyTag; messages from one sender with one tag are received in the order they were sent.
inline constexpr int kAnySource = -1;
inline constexpr int kAnyTag = -1;

// What a completed receive got: who sent it, with which tag, how many elements (at most the
// receive's count).
struct RecvStatus {
  int source = -1;
  int tag = 0;
  size_t count = 0;
};

// Handle of an asynchronous operation.
class HOOP_API Work {
 public:
  Work() = default;
  explicit Work(std::shared_ptr<detail::WorkState> state);

  // True when the operation has finished; rethrows its error if it failed.
  bool test();
  // Blocks until the operation finishes; rethrows its error. The operation's own timeout
  // bounds the wait.
  void wait();
  // Waits at most `limit`; true when finished (rethrowing its error), false if still running.
  bool wait_for(std::chrono::milliseconds limit);
  uint64_t seq() const;
  bool valid() const { return state_ != nullptr; }
  // For a finished receive: its source, tag and element count (throws invalid_argument for
  // other operations or one still running).
  RecvStatus status() const;

 private:
  std::shared_ptr<detail::WorkState> state_;
};

struct LinkStats {
  int peer = -1;
  std::string transport;  // "shm" or "tcp"
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
};

struct CommStats {
  uint64_t ops = 0;
  uint64_t bytes_sent = 0;      // payload bytes, headers excluded
  uint64_t bytes_received = 0;
  std::vector<LinkStats> links;  // one per connected peer
};

// How to find the other ranks. from_env() fills it from hoop-run's, torchrun's, Slurm's,
// Open MPI's or PMI's environment variables.
struct InitParams {
  int rank = -1;
  int size = -1;
  int local_rank = -1;
  std::shared_ptr<Store> store;  // shared by all ranks of the job
  std::string job_id;            // empty: agreed through the store
};

class Communicator;

// What a process needs to join a running job (Communicator::join).
struct JoinParams {
  std::shared_ptr<Store> store;  // the job's store
  std::string job_id;            // empty: the one the job agreed on in the store
};

// What Communicator::agree() decided.
struct Agreement {
  bool value = false;             // every member that took part voted true
  std::vector<int> failed_ranks;  // members found dead, who took no part (increasing)
};

// RAII group: group_start() now, group_end() at end() or, if end() was not called, in the
// destructor (where an error is kept in the group's handles instead of thrown).
class HOOP_API GroupScope {
 public:
  explicit GroupScope(Communicator& c);
  ~GroupScope();
  GroupScope(const GroupScope&) = delete;
  GroupScope& operator=(const GroupScope&) = delete;
  void end();

 private:
  Communicator& comm_;
  bool ended_ = false;
};

// Memory in a shared mapping that the other ranks of this host can map, then read and write in
// place (Communicator::alloc). A collective whose buffers lie in registered memory on every rank
// of the host moves data between the ranks' buffers directly: no copy into a staging slot, no
// kernel copy (docs/ARCHITECTURE.md, "Registered buffers"). Movable; the destructor (or free())
// unregisters and unmaps it: a call naming it afterwards fails with invalid_argument.
class HOOP_API SharedBuffer {
 public:
  SharedBuffer() = default;
  SharedBuffer(SharedBuffer&& other) noexcept;
  SharedBuffer& operator=(SharedBuffer&& other) noexcept;
  ~SharedBuffer();
  SharedBuffer(const SharedBuffer&) = delete;
  SharedBuffer& operator=(const SharedBuffer&) = delete;

  void* data() const { return data_; }
  size_t size() const { return size_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  explicit operator bool() const { return data_ != nullptr; }
  void free();

 private:
  friend class Communicator;
  SharedBuffer(void* data, size_t size) : data_(data), size_(size) {}
  void* data_ = nullptr;
  size_t size_ = 0;
};

class HOOP_API Communicator {
 public:
  // Collective over all ranks of InitParams.
  static std::shared_ptr<Communicator> create(const InitParams& params, CommOptions opts = {});
  // Reads the environment (see docs/ARCHITECTURE.md, "Bootstrap"), connects to or starts the
  // rendezvous store, and creates the world communicator.
  static std::shared_ptr<Communicator> from_env(CommOptions opts = {});

  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const;
  int size() const;
  int local_rank() const;  // rank among the ranks of this host
  int local_size() const;
  const std::string& job_id() const;

  // --- collectives (blocking) ---
  void allreduce(const void* send, void* recv, size_t count, DataType dt, RedOp op,
                 const OpOptions& o = {});
  void reducescatter(const void* send, void* recv, size_t recvcount, DataType dt, RedOp op,
                     const OpOptions& o = {});
  void allgather(const void* send, void* recv, size_t sendcount, DataType dt,
                 const OpOptions& o = {});
  // `send` is read on the root only, `recv` is written on every rank (may equal send).
  void broadcast(const void* send, void* recv, size_t count, DataType dt, int root,
                 const OpOptions& o = {});
  // `recv` is written on the root only.
  void reduce(const void* send, void* recv, size_t count, DataType dt, RedOp op, int root,
              const OpOptions& o = {});
  void barrier(const OpOptions& o = {});

  // AllToAll: block j of rank r's send (count elements at send + j*count) lands at
  // recv + r*count on rank j. In place when send == recv.
  void alltoall(const void* send, void* recv, size_t count, DataType dt, const OpOptions& o = {});
  // AllToAllv (MPI_Alltoallv): sendcounts[j] elements at send + sdispls[j] go to rank j, which
  // receives them at its recv + rdispls[r] (recvcounts[r] elements, which must equal
  // sendcounts[j] of the sender: a difference is a mismatch error naming both sizes). Counts may
  // be zero; empty displacements mean packed blocks in rank order. No in-place form: send and
  // recv must not overlap.
  void alltoallv(const void* send, std::span<const size_t> sendcounts, std::span<const size_t> sdispls,
                 void* recv, std::span<const size_t> recvcounts, std::span<const size_t> rdispls,
                 DataType dt, const OpOptions& o = {});
  // Gather: rank j's count elements land at recv + j*count on the root (recv is read on the
  // root only; in place when the root's send == recv + root*count).
  void gather(const void* send, void* recv, size_t count, DataType dt, int root,
              const OpOptions& o = {});
  // Gatherv: rank j's sendcount elements land at the root's recv + displs[j]; recvcounts (and
  // displs; empty: packed) are read on the root only and recvcounts[j] must equal j's sendcount
  // (else a mismatch error). In place when the root's send == recv + displs[root].
  void gatherv(const void* send, size_t sendcount, void* recv, std::span<const size_t> recvcounts,
               std::span<const size_t> displs, DataType dt, int root, const OpOptions& o = {});
  // Scatter: block j of the root's send (count elements at send + j*count) lands in rank j's recv
  // (send is read on the root only; in place when the root's recv == send + root*count).
  void scatter(const void* send, void* recv, size_t count, DataType dt, int root,
               const OpOptions& o = {});
  // Scatterv: sendcounts[j] elements at the root's send + displs[j] land in rank j's recv
  // (recvcount elements, which must equal sendcounts[j], else a mismatch error); sendcounts and
  // displs (empty: packed) are read on the root only. In place when the root's
  // recv == send + displs[root].
  void scatterv(const void* send, std::span<const size_t> sendcounts, std::span<const size_t> displs,
                void* recv, size_t recvcount, DataType dt, int root, const OpOptions& o = {});
  // AllGatherv: rank j's counts[j] elements land at recv + displs[j] on every rank (empty
  // displs: packed in rank order; in place when send == recv + displs[rank]).
  void allgatherv(const void* send, void* recv, std::span<const size_t> counts,
                  std::span<const size_t> displs, DataType dt, const OpOptions& o = {});
  // ReduceScatterv: send holds sum(recvcounts) elements, blocks packed in rank order; rank r gets
  // the reduction of block r (recvcounts[r] elements) in recv. In place when
  // recv == send + (recvcounts[0] + ... + recvcounts[r-1]).
  void reducescatterv(const void* send, void* recv, std::span<const size_t> recvcounts, DataType dt,
                      RedOp op, const OpOptions& o = {});

  // --- point-to-point ---
  // Sends and receives with any peers progress concurrently with each other (not in issue
  // order), on links of their own, so an irecv posted before the matching isend, around a ring,
  // completes. A send completes once its data is buffered (by the link, or by the receiver
  // when no receive matches yet) or delivered. A message longer than the receive's count is a
  // mismatch error naming both sizes; a shorter one is received (see RecvStatus::count).
  // Without a tag, the tag is 0.
  void send(const void* buf, size_t count, DataType dt, int peer, const OpOptions& o = {});
  void send(const void* buf, size_t count, DataType dt, int peer, int tag, const OpOptions& o = {});
  RecvStatus recv(void* buf, size_t count, DataType dt, int peer, const OpOptions& o = {});
  // peer may be kAnySource, tag kAnyTag.
  RecvStatus recv(void* buf, size_t count, DataType dt, int peer, int tag, const OpOptions& o = {});

  // Group calls (NCCL's ncclGroupStart/End): the point-to-point calls issued between
  // group_start() and group_end() on this thread form one operation whose sends and receives
  // progress together; blocking calls inside a group return at once (a recv then returns its
  // own peer, tag and count: the *_async forms' handles give the real status), and group_end()
  // blocks until every one of them is done (rethrowing the first error). Groups nest; the
  // outermost group_end() waits for them. group_end_async() returns a handle instead.
  void group_start();
  void group_end();
  Work group_end_async();

  // --- the same, asynchronous ---
  Work allreduce_async(const void* send, void* recv, size_t count, DataType dt, RedOp op,
                       const OpOptions& o = {});
  Work reducescatter_async(const void* send, void* recv, size_t recvcount, DataType dt,
                           RedOp op, const OpOptions& o = {});
  Work allgather_async(const void* send, void* recv, size_t sendcount, DataType dt,
                       const OpOptions& o = {});
  Work broadcast_async(const void* send, void* recv, size_t count, DataType dt, int root,
                       const OpOptions& o = {});
  Work reduce_async(const void* send, void* recv, size_t count, DataType dt, RedOp op, int root,
                    const OpOptions& o = {});
  Work barrier_async(const OpOptions& o = {});
  Work alltoall_async(const void* send, void* recv, size_t count, DataType dt, const OpOptions& o = {});
  Work alltoallv_async(const void* send, std::span<const size_t> sendcounts,
                       std::span<const size_t> sdispls, void* recv, std::span<const size_t> recvcounts,
                       std::span<const size_t> rdispls, DataType dt, const OpOptions& o = {});
  Work gather_async(const void* send, void* recv, size_t count, DataType dt, int root,
                    const OpOptions& o = {});
  Work gatherv_async(const void* send, size_t sendcount, void* recv, std::span<const size_t> recvcounts,
                     std::span<const size_t> displs, DataType dt, int root, const OpOptions& o = {});
  Work scatter_async(const void* send, void* recv, size_t count, DataType dt, int root,
                     const OpOptions& o = {});
  Work scatterv_async(const void* send, std::span<const size_t> sendcounts,
                      std::span<const size_t> displs, void* recv, size_t recvcount, DataType dt,
                      int root, const OpOptions& o = {});
  Work allgatherv_async(const void* send, void* recv, std::span<const size_t> counts,
                        std::span<const size_t> displs, DataType dt, const OpOptions& o = {});
  Work reducescatterv_async(const void* send, void* recv, std::span<const size_t> recvcounts,
                            DataType dt, RedOp op, const OpOptions& o = {});
  Work send_async(const void* buf, size_t count, DataType dt, int peer, const OpOptions& o = {});
  Work send_async(const void* buf, size_t count, DataType dt, int peer, int tag,
                  const OpOptions& o = {});
  Work recv_async(void* buf, size_t count, DataType dt, int peer, const OpOptions& o = {});
  Work recv_async(void* buf, size_t count, DataType dt, int peer, int tag, const OpOptions& o = {});

  // Collective: ranks with the same color form a new communicator, ordered by (key, rank).
  // A negative color takes no part and gets nullptr.
  std::shared_ptr<Communicator> split(int color, int key);

  // Fails every pending and future operation with ErrorCode::aborted, unblocks all waiters and
  // tells the peers. Safe to call from any thread.
  void abort(const std::string& reason = "abort() called");
  bool aborted() const;

  // --- Surviving a dead rank (docs/RELIABILITY.md, "Revoke, shrink, agree") ---
  // Not collective: every pending and later operation of every member fails with
  // ErrorCode::revoked, naming this rank and the reason, within a second. shrink() and agree()
  // still work on a revoked communicator. Safe to call from any thread.
  void revoke(const std::string& reason);
  bool revoked() const;
  // Collective among the live members, on a failed or revoked communicator too: they agree
  // through the store, within the timeout, on which members are alive, and each gets a new
  // communicator of those ranks, in their old order. A member the others went on without
  // (found dead, or arriving after they decided) gets Error{peer_failure}.
  std::shared_ptr<Communicator> shrink();
  // Fault-tolerant agreement on one bit among the live members (as MPI's MPIX_Comm_agree):
  // every member that takes part gets the same answer, whoever dies meanwhile. A training step
  // commits when value is true and failed_ranks is empty.
  Agreement agree(bool value);
  // Collective among the members: waits (within the timeout) for the next k processes that
  // called join() on this job's store, and gives everyone a communicator of size() + k ranks:
  // the members keep their ranks, the newcomers follow in the order they joined.
  std::shared_ptr<Communicator> grow(int k);
  // A new process joins a running job (the members call grow()): it takes the next ticket in
  // the job's store and waits, within the timeout, for its place in the grown communicator.
  static std::shared_ptr<Communicator> join(const JoinParams& params, CommOptions opts = {});
  // Processes that called join() and wait for a grow (not collective: asks the store).
  int64_t waiting_newcomers();

  void set_timeout(std::chrono::milliseconds t);
  std::chrono::milliseconds timeout() const;

  CommStats stats() const;
  void reset_stats();

  // --- registered buffers (not collective: each rank registers its own memory) ---
  // `bytes` of fresh memory in a shared mapping, pre-faulted and registered.
  SharedBuffer alloc(size_t bytes);
  // Registers memory the caller already has in a shared file mapping (MAP_SHARED of a file, a
  // memfd or /dev/shm: torch's share_memory_() tensors); throws invalid_argument when it is not
  // (or overlaps a registered buffer). deregister_buffer(ptr) ends it (ptr: as registered), and
  // must come before the memory is unmapped: until then hoop takes those addresses for it.
  void register_buffer(void* ptr, size_t bytes);
  void deregister_buffer(void* ptr);

  // For tools: the name of the algorithm the last operation of each kind used ("ring", ...).
  std::string last_algorithm() const;

  explicit Communicator(std::unique_ptr<detail::CommImpl> impl);

 private:
  friend struct detail::CommAccess;  // hoop's own code and tools reach the inside through it
  std::unique_ptr<detail::CommImpl> impl_;
};

}  // namespace hoop
