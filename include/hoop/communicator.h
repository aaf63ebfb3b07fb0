// A communicator: a group of ranks that run collectives together.
//
// Operations run in the order they are issued on each communicator, by a progress engine;
// the blocking calls return when this rank's part is done, the *_async ones return a Work
// handle at once. Several communicators may be used at the same time (from different threads).
// Buffer conventions follow NCCL: ReduceScatter in place reads recv == send + rank*recvcount;
// AllGather in place has send == recv + rank*sendcount.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hoop/error.h"
#include "hoop/store.h"
#include "hoop/types.h"

namespace hoop {

namespace detail {
class WorkState;
class CommImpl;
}  // namespace detail

struct CommOptions {
  // Stall timeout of every wait: an operation fails when it makes no progress for this long.
  // Default: HOOP_TIMEOUT (seconds) or 300 s.
  std::optional<std::chrono::milliseconds> timeout;
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

// Handle of an asynchronous operation.
class Work {
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

class Communicator {
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
  void send(const void* buf, size_t count, DataType dt, int peer, const OpOptions& o = {});
  void recv(void* buf, size_t count, DataType dt, int peer, const OpOptions& o = {});

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
  Work send_async(const void* buf, size_t count, DataType dt, int peer, const OpOptions& o = {});
  Work recv_async(void* buf, size_t count, DataType dt, int peer, const OpOptions& o = {});

  // Collective: ranks with the same color form a new communicator, ordered by (key, rank).
  // A negative color takes no part and gets nullptr.
  std::shared_ptr<Communicator> split(int color, int key);

  // Fails every pending and future operation with ErrorCode::aborted, unblocks all waiters and
  // tells the peers. Safe to call from any thread.
  void abort(const std::string& reason = "abort() called");
  bool aborted() const;

  void set_timeout(std::chrono::milliseconds t);
  std::chrono::milliseconds timeout() const;

  CommStats stats() const;
  void reset_stats();

  // For tools: the name of the algorithm the last operation of each kind used ("ring", ...).
  std::string last_algorithm() const;

  explicit Communicator(std::unique_ptr<detail::CommImpl> impl);
  detail::CommImpl& impl() { return *impl_; }

 private:
  std::unique_ptr<detail::CommImpl> impl_;
};

}  // namespace hoop
