// Algorithms as schedules: a pure description, per rank, of who sends which element range to
// whom, who receives and reduces what, step by step. No I/O here. The engine runs a schedule
// over real links; tests, the checker and tools inspect the same object.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "hoop/types.h"

namespace hoop::schedule {

// The buffers an action may name. `send` and `recv` are the user's buffers; `scratch` is
// engine-owned memory of RankSchedule::scratch_count elements.
enum class Buf : uint8_t { send, recv, scratch };

struct Range {
  Buf buf = Buf::send;
  size_t offset = 0;  // elements
  size_t count = 0;   // elements
};

enum class ActionKind : uint8_t {
  send,         // stream `src` to `peer`
  recv_copy,    // receive from `peer` into `dst`
  recv_reduce,  // dst = op(src, received from `peer`), element-wise; src may equal dst
  copy,         // dst = src (local)
  finish_avg,   // dst /= nranks (local; the last step of an average)
};

struct Action {
  ActionKind kind = ActionKind::send;
  int peer = -1;
  Range src;
  Range dst;
  // For a send: index (within the same step) of the receive it forwards. Element i may be sent
  // once that receive has completed element i, so a chain pipelines in slices.
  int after = -1;
  // Which of the parallel links to `peer` carries the transfer (multi-channel schedules).
  // Both sides of a transfer name the same channel.
  int channel = 0;
  // recv_reduce only: dst = op(received, src) instead of op(src, received). Float reductions
  // are not bitwise commutative (NaN payloads, min/max of -0.0/+0.0 or NaN), so when both
  // sides of an exchange reduce the same pair they must agree on which operand comes first.
  bool received_first = false;
};

// The actions of one step run concurrently; a step starts when the previous one is complete.
// Actions on the same peer and direction run in the order listed.
struct Step {
  std::vector<Action> actions;
};

struct RankSchedule {
  std::string algorithm;
  std::vector<Step> steps;
  size_t scratch_count = 0;  // elements of scratch needed
};

// Where the ranks run: host_of_rank[r] is the index (0..nhosts-1, numbered in order of first
// appearance) of rank r's host. Ranks of one host talk over shared memory.
struct Topology {
  std::vector<int> host_of_rank;
  int nhosts() const;
  std::vector<int> ranks_of_host(int host) const;  // in rank order
  static Topology single_host(int nranks);
  static Topology from_host_ids(const std::vector<std::string>& host_ids);
};

// What a collective call asks for, independent of buffers' addresses.
struct CollectiveDesc {
  OpType op = OpType::allreduce;
  size_t count = 0;  // allreduce/broadcast/reduce: elements; reducescatter: recvcount;
                     // allgather: sendcount; send/recv: elements
  int nranks = 1;
  int root = 0;      // broadcast/reduce root; send/recv peer
  RedOp redop = RedOp::sum;
  bool in_place = false;
  const Topology* topology = nullptr;  // null: every rank on one host
  int nchannels = 1;                   // parallel links per peer a builder may spread over
};

// A contiguous split of `count` elements into `parts` chunks whose sizes differ by at most one.
struct Chunking {
  size_t count = 0;
  int parts = 1;
  size_t offset(int i) const;  // first element of chunk i (i in [0, parts])
  size_t size(int i) const { return offset(i + 1) - offset(i); }
};

// Which phases of the ring AllReduce to build: both, or one of them (used when the reduce
// phase runs on another element type than the gather phase, as for f16/bf16).
enum class RingPhases : uint8_t { both, reduce_scatter_only, allgather_only };

// Ring AllReduce of desc.count elements: the buffer is cut into N chunks; ReduceScatter for N-1
// steps (at step k rank r sends chunk (r-k) mod N to r+1 and receives chunk (r-k-1) mod N from
// r-1, reducing it), after which rank r owns the full reduction of chunk (r+1) mod N; then
// AllGather for N-1 steps. Partial sums live in the recv buffer.
RankSchedule ring_allreduce(const CollectiveDesc& desc, int rank,
                            RingPhases phases = RingPhases::both);
// The chunk a rank owns after the ring ReduceScatter phase of ring_allreduce.
int ring_allreduce_owned_chunk(int rank, int nranks);

// Ring ReduceScatter: rank r ends with chunk r (recvcount elements) in recv.
RankSchedule ring_reducescatter(const CollectiveDesc& desc, int rank);
// Ring AllGather: rank r's sendcount elements land at recv + r*sendcount on every rank.
RankSchedule ring_allgather(const CollectiveDesc& desc, int rank);
// Pipelined chain root -> root+1 -> ... -> root-1 (mod N).
RankSchedule chain_broadcast(const CollectiveDesc& desc, int rank);
// Pipelined chain root+1 -> root+2 -> ... -> root, reducing on the way.
RankSchedule chain_reduce(const CollectiveDesc& desc, int rank);
// Dissemination barrier: ceil(log2 N) rounds of empty messages to r+2^k.
RankSchedule dissemination_barrier(const CollectiveDesc& desc, int rank);
// One step of empty messages around the ring: run before an operation with that operation's
// identity in the headers, it makes every rank compare its call with its predecessor's
// (HOOP_CHECK=1), so any difference between ranks is caught before data moves.
RankSchedule signature_ring(int nranks, int rank);
// Point-to-point: one send or receive.
RankSchedule point_to_point(const CollectiveDesc& desc, int rank);

// ---- tree and naive algorithms (begin) ----
// The two binary trees of the "tree" algorithm over ranks: the top (the root of a Reduce or
// Broadcast, rank 0 for AllReduce) heads both trees with one child in each; every other rank
// has two children in at most one of the trees, so each rank forwards about as much data as
// it receives. parent[r] is -1 for the top; children[r] lists 0, 1 or 2 ranks.
struct BinaryTree {
  std::vector<int> parent;
  std::vector<std::vector<int>> children;
};
struct DoubleBinaryTree {
  int top = 0;
  BinaryTree trees[2];
};
DoubleBinaryTree double_binary_tree(int nranks, int top);
// Elements per pipeline chunk of the tree's reduction (32 Ki elements: 128 KiB of f32).
inline constexpr size_t kTreeChunkElements = 32768;
// Double binary tree: half of the buffer reduced up (and broadcast down) each tree.
RankSchedule tree_allreduce(const CollectiveDesc& desc, int rank);
RankSchedule tree_reduce(const CollectiveDesc& desc, int rank);
RankSchedule tree_broadcast(const CollectiveDesc& desc, int rank);
// Parameter server: everyone sends its buffer to the root, which reduces in rank order (and,
// for AllReduce, root 0 sends the result back to everyone).
RankSchedule naive_allreduce(const CollectiveDesc& desc, int rank);
RankSchedule naive_reduce(const CollectiveDesc& desc, int rank);
RankSchedule naive_broadcast(const CollectiveDesc& desc, int rank);
// ---- tree and naive algorithms (end) ----

// ---- halving-doubling, recursive-doubling, hierarchical, multi-channel (begin) ------------

// Rabenseifner: recursive-halving ReduceScatter then recursive-doubling AllGather; ranks
// beyond the largest power of two fold into a partner first (see halving_doubling.cc).
RankSchedule halving_doubling_allreduce(const CollectiveDesc& desc, int rank);
RankSchedule halving_doubling_reducescatter(const CollectiveDesc& desc, int rank);
RankSchedule halving_doubling_allgather(const CollectiveDesc& desc, int rank);
// log2(N) exchanges of the whole vector with rank XOR 2^k, reduced in a canonical operand
// order so that every rank ends with the same bits (see recursive_doubling.cc).
RankSchedule recursive_doubling_allreduce(const CollectiveDesc& desc, int rank);
// Reduce inside each host, AllReduce across hosts per local slice, gather inside each host;
// uses desc.topology (see hierarchical.cc).
RankSchedule hierarchical_allreduce(const CollectiveDesc& desc, int rank);

// Cuts a collective into up to `channels` independent parts (fewer when count is small), builds
// `base` for each part, lays the parts' ranges side by side, sets Action::channel to the part
// and merges step k of every part into one step. `base` must be one of ring_allreduce,
// ring_reducescatter, ring_allgather, chain_broadcast, chain_reduce (or anything whose ranges
// follow the same buffer layouts: per-rank blocks for ReduceScatter/AllGather).
using ScheduleBuilder = std::function<RankSchedule(const CollectiveDesc&, int)>;
RankSchedule with_channels(ScheduleBuilder base, const CollectiveDesc& desc, int rank, int channels);
// Parts with_channels uses for `count` elements and `channels` channels.
int channel_parts(size_t count, int channels);
// Below this many elements per part, splitting costs more (headers, steps) than it gains.
inline constexpr size_t kMinElementsPerChannel = 4096;

// ---- halving-doubling, recursive-doubling, hierarchical, multi-channel (end) --------------

// The default algorithm for a collective (until the tuner picks among several).
RankSchedule build_default(const CollectiveDesc& desc, int rank);
// By name ("ring", "chain", ...); throws hoop::Error{invalid_argument} for an unknown name or
// one that does not implement desc.op.
RankSchedule build(const std::string& algorithm, const CollectiveDesc& desc, int rank);
std::vector<std::string> algorithms_for(OpType op);

// Human-readable listing (for tools and test failure messages).
std::string to_string(const RankSchedule& s);

// Total elements this rank sends / receives over the whole schedule.
size_t elements_sent(const RankSchedule& s);
size_t elements_received(const RankSchedule& s);

}  // namespace hoop::schedule
