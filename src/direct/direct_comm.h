// shm-direct: collectives among the ranks of one host through one shared region, instead of
// N-1 ring hops over pairwise links.
//
//  - Small messages (input up to Tunables::small_bytes): every rank copies its input into its
//    cell with the op number as flag, then reads every cell and computes its own result,
//    reducing in rank order, so all ranks get bit-identical results. Two cells per rank
//    (alternating ops) let a rank start the next op while slow peers still read the last.
//  - Large messages: pipelined chunks. Each rank copies its chunk into its slot (all but the
//    part it reduces itself), reduces its 1/N part reading every peer's slot (rank order,
//    vectorized kernels), leaves the result in its own slot, and every rank copies the other
//    parts out. `stages` slots per rank keep several chunks in flight.
//  - AllToAll: block p of every rank's input goes to rank p, through the cells or, chunk by
//    chunk, the slots (a chunk holds the same sub-range of every block, as for ReduceScatter).
//  - Single copy, where the kernel lets ranks read each other's memory: ReduceScatter,
//    AllGather and Broadcast from Tunables::single_copy_bytes, AllReduce from
//    Tunables::single_copy_allreduce_bytes, AllToAll from Tunables::single_copy_alltoall_bytes
//    when no rank is in place. Ranks read each other's buffers with process_vm_readv, no slot
//    in between (direct_single_copy.cc).
//
// f16/bf16 reductions run on f32 copies and round once, like the schedule-based path.
#pragma once

#include <sys/types.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "direct/direct_region.h"
#include "direct/direct_rule.h"
#include "direct/direct_sync.h"
#include "engine/scratch.h"
#include "hoop/store.h"
#include "hoop/types.h"
#include "transport/waiter.h"

namespace hoop::direct {

struct Call {
  OpType op = OpType::allreduce;
  DataType dtype = DataType::f32;
  RedOp redop = RedOp::sum;
  size_t count = 0;  // as in CollectiveDesc: reducescatter recvcount, allgather sendcount
  int root = 0;
  const void* send = nullptr;
  void* recv = nullptr;
  uint64_t seq = 0;  // the communicator's sequence number (for errors and the signature)
};

struct CommParams {
  std::string job_id;
  uint64_t comm_id = 0;
  int rank = 0;
  int nranks = 1;
  std::vector<pid_t> pids;
  std::shared_ptr<Store> store;
  SpinPolicy spin;
};

class DirectComm {
 public:
  DirectComm(CommParams p, transport::Waiter& waiter, const std::atomic<bool>& abort_flag);
  ~DirectComm();

  // Runs one collective to completion. Throws hoop::Error (timeout naming the peer, peer
  // failure, mismatch, aborted); the caller then poisons the region.
  void run(const Call& c, std::chrono::milliseconds timeout);
  // Fails every rank's current and later operations on the region (no-op before it exists).
  void poison(const std::string& reason) noexcept;

 private:
  void ensure_region(const ErrorContext& ctx, std::chrono::milliseconds timeout);
  void run_native(const Call& c);  // dtype as given (f16/bf16 reductions already widened)
  void run_half(const Call& c);
  OpSignature signature(const Call& c) const;
  size_t input_bytes(const Call& c) const;

  // Small-message path (cells).
  void small(const Call& c);
  const std::byte* small_cell(int peer, int buffer, uint64_t n, const OpSignature& sig);

  // Large-message path (chunk slots).
  void large_allreduce(const Call& c, bool only_root_gets_result);
  void large_reducescatter(const Call& c);
  void large_allgather(const Call& c);
  // The chunks of one large call: `n` of `per` elements (the last one shorter), numbered from
  // g0 on the region. Every rank takes the same numbers, since all run the same calls.
  struct Chunks {
    uint64_t g0;
    size_t n;
    size_t per;
    size_t count;
    size_t len(size_t k) const { return std::min(per, count - k * per); }
  };
  Chunks take_chunks(size_t count, size_t per_chunk);
  // ReduceScatter and AllToAll: a chunk holds the same sub-range of every block, block p at
  // p * per of the slot; copy_blocks_in puts chunk k of every block but the own one there.
  Chunks take_block_chunks(const Call& c);
  void copy_blocks_in(const Call& c, const Chunks& ch, size_t k);
  void large_broadcast(const Call& c);
  void large_alltoall(const Call& c);
  // Waits until every rank released stage (g % stages) of chunk g - stages.
  void wait_stage_free(uint64_t g);
  void publish_chunk_in(uint64_t g, const OpSignature& sig);
  void wait_chunk_in(int peer, uint64_t g, const OpSignature& sig);
  void wait_chunk_reduced(int peer, uint64_t g);
  void set_chunk_reduced(uint64_t g);
  void set_chunk_done(uint64_t g);

  // Single-copy path.
  bool single_copy(const Call& c) const;  // whether this call takes it
  void single_copy_allreduce(const Call& c);
  void single_copy_reducescatter(const Call& c);
  void single_copy_allgather(const Call& c);
  void single_copy_broadcast(const Call& c);
  void single_copy_alltoall(const Call& c);
  struct PeerBuffers {
    uint64_t input = 0, output = 0;  // addresses in the peer's address space
  };
  // Publishes this rank's buffers with chunk g (the call's first) and reads the peers'.
  void publish_buffers(uint64_t g, const void* input, const void* output);
  PeerBuffers peer_buffers(int peer, uint64_t g);
  std::vector<PeerBuffers> exchange_buffers(uint64_t g, const void* input, const void* output);
  // Copies `bytes` from `addr` in the peer's address space; throws peer_failure when it cannot.
  void read_peer(int peer, void* dst, uint64_t addr, size_t bytes);
  void reduce_inputs(const Call& c, const std::vector<PeerBuffers>& peers, std::byte* dst, const std::byte* own,
                     size_t offset, size_t count);
  // Marks the call's last chunk done and, if peers read this rank's buffers, waits for them all.
  void finish_single_copy(uint64_t g_last, bool others_read_mine);

  CommParams p_;
  transport::Waiter& waiter_;
  const std::atomic<bool>& abort_;
  std::unique_ptr<Region> region_;
  std::unique_ptr<Sync> sync_;
  size_t small_limit_ = 0;
  size_t single_copy_bytes_ = 0;  // calls moving this much take the single-copy path; 0: never
  size_t single_copy_part_ = 0;   // bytes a single-copy reduction reads per peer and call
  size_t single_copy_allreduce_bytes_ = 0;  // AllReduce also needs this much
  size_t single_copy_alltoall_bytes_ = 0;   // AllToAll's own threshold; 0: never
  OpSignature current_sig_;
  uint64_t ops_ = 0;        // ops run on the region (identical on every rank)
  uint64_t small_ops_ = 0;  // small ops run on the region (identical on every rank)
  std::vector<uint64_t> cell_seen_;  // per peer: the last small op whose cell this rank read
  uint64_t chunks_ = 0;     // chunks run on the region (identical on every rank)
  engine::ScratchPool staging_;
  engine::ScratchPool reduce_buffers_;  // the cache-sized buffers the large reductions run in
};

}  // namespace hoop::direct
