// Algorithms as schedules: a pure description, per rank, of who sends which element range to
// whom, who receives and reduces what, step by step. No I/O here. The engine runs a schedule
// over real links; tests, the checker and tools inspect the same object.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "hoop/types.h"

namespace hoop::schedule {

// The buffers an action may name. `send` and `recv` are the user's buffers; `scratch` is
// engine-owned memory of RankSchedule::scratch_count elements; `region` is the rank's window in
// the shared region of one host (RankSchedule::region_count elements), which its peers read.
enum class Buf : uint8_t { send, recv, scratch, region };

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
  // Shared-region actions (shm-direct): one-sided, over memory the ranks of a host share. A
  // step holding them holds no send or receive, and its actions run one after another, in the
  // order listed, each waiting for what it names.
  publish,      // raise this rank's flag by one: what it wrote before is now readable
  wait_flag,    // wait until `peer`'s flag reaches `flag`
  read,         // dst = `remote` of `peer` (its region, send or recv), once its flag reaches `flag`
  read_reduce,  // dst = op(src, `remote` of `peer`), once its flag reaches `flag`
  write,        // `remote` of `peer` (its send or recv) = src, once its flag reaches `flag`
};

// The actions that run over one host's shared region instead of links.
inline bool is_region_action(ActionKind k) {
  return k == ActionKind::publish || k == ActionKind::wait_flag || k == ActionKind::read ||
         k == ActionKind::read_reduce || k == ActionKind::write;
}

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
  // read / read_reduce: the range of `peer`'s buffers read (`peer` may be this rank: its own
  // region or buffers, with flag 0). wait_flag / read / read_reduce: the flag value waited for
  // (the peer's flag-th publish; every flag counts from 0 at the start of the operation).
  Range remote;
  uint32_t flag = 0;
  // copy / write / read: what is written is not read again soon (an operation's output): the
  // engine may store around the caches (non-temporal stores; a read through the kernel cannot).
  bool stream = false;
};

// The actions of one step run concurrently; a step starts when the previous one is complete.
// Actions on the same peer and direction run in the order listed.
struct Step {
  std::vector<Action> actions;
};

// shm-direct: a choice every rank makes alike, from what all ranks announced with their first
// publish (so before it the rank waits for every peer's first publish).
enum class BranchRule : uint8_t {
  none,
  any_in_place,    // variant 1 when some rank's call is in place, else variant 0
  all_registered,  // variant 1 when every rank's buffers are registered, else variant 0
};

struct RankSchedule {
  std::string algorithm;
  std::vector<Step> steps;
  size_t scratch_count = 0;  // elements of scratch needed
  size_t region_count = 0;   // elements of this rank's shared-region window (shm-direct)
  // Steps of shared-region actions (shm-direct): runs over the host's region, not over links.
  bool shared_region = false;
  // Reads or writes peers' own buffers (single copy, zero copy): the rank announces where its
  // buffers are, and whether they are registered.
  bool announces_buffers = false;
  // Shared-region schedules whose last publish (in every variant) is followed by waits only: once
  // a peer has seen that flag, the rank reads nothing of the peer's window but its flag and call
  // (which the transport lets it read while they are rewritten), so the peer may rewrite its
  // window two operations on (else it waits for the rank's first publish of the next
  // operation). All ranks of a call agree, and publish equally often (the checker holds them
  // to it).
  bool closing_publish = false;
  // After `steps`, the steps of variants[i], i chosen by `branch` (none: no variants).
  BranchRule branch = BranchRule::none;
  std::vector<std::vector<Step>> variants;
};

// The variant `rule` takes for what the ranks' calls are like.
inline size_t branch_variant(BranchRule rule, bool any_in_place, bool all_registered) {
  if (rule == BranchRule::any_in_place) return any_in_place ? 1 : 0;
  if (rule == BranchRule::all_registered) return all_registered ? 1 : 0;
  return 0;
}
// The schedule as it runs when its branch takes `variant`: `steps` then that variant's steps,
// without a branch (the schedule itself when it has none).
RankSchedule with_variant(const RankSchedule& s, size_t variant);
// Whether `steps` end with a publish followed by waits only (RankSchedule::closing_publish).
bool ends_with_closing_publish(const std::vector<Step>& steps);

// The shared-region window of shm-direct, in elements of the type moved: which path a call
// takes (cells, pipelined slots or single copy) and how the slots are cut. From the HOOP_DIRECT_*
// tunables and the element size (comm), or defaults() for tests and tools.
struct RegionShape {
  size_t cell_elements = 0;   // inputs of up to this many elements go through one cell per rank
  size_t chunk_elements = 0;  // one pipelined slot per rank and stage
  size_t stages = 2;          // slots (chunks in flight) per rank
  size_t align_elements = 1;  // the parts of a chunk that ranks reduce are cut at multiples of this
  // AllReduce and Reduce of at least registered_elements decide at run time, alike on every rank,
  // whether every rank's buffers are registered (then the ranks reduce their parts reading the
  // peers' inputs and write the results into the peers' outputs: zero copy); 0: never.
  size_t registered_elements = 0;
  size_t zero_copy_piece_elements = 0;  // reduced at once in cache, then written to every output
  // Outputs of at least this many elements are stored around the caches where a rank copies
  // them itself (zero copy's results; single copy's reads of registered buffers); 0: never.
  size_t stream_elements = 0;
  // Peers read each other's own buffers (no slot) for AllReduce and Broadcast buffers of at least
  // single_copy_elements (ReduceScatter, AllGather: N blocks), AllReduce also needing
  // single_copy_allreduce_elements, AllGather single_copy_allgather_elements (when set), AllToAll
  // (N blocks) single_copy_alltoall_elements instead; 0: never (also where the kernel forbids
  // process_vm_readv).
  size_t single_copy_elements = 0;
  size_t single_copy_allreduce_elements = 0;
  size_t single_copy_allgather_elements = 0;
  size_t single_copy_alltoall_elements = 0;
  size_t single_copy_part_elements = 0;  // what a single-copy reduction reads per peer at once
  // Broadcast through the cells ends with a "done" publish on every rank (a closing publish):
  // the root reads nobody and runs ahead, and without it its window of the operation after
  // next is free only once every reader started the next one, which with more ranks than cores
  // waits for the scheduler. With the cores to spare the extra publish costs more than it saves.
  bool broadcast_cells_done = false;
  static RegionShape defaults();         // 64-element cells, 32 Ki-element slots, 2 stages
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

// Where each rank's block lies in one buffer, in elements: block j is counts[j] elements at
// displs[j] (both of nranks entries).
struct Blocks {
  std::vector<size_t> counts;
  std::vector<size_t> displs;
  size_t count(int j) const { return counts[static_cast<size_t>(j)]; }
  size_t displ(int j) const { return displs[static_cast<size_t>(j)]; }
  Range range(Buf b, int j) const { return Range{b, displ(j), count(j)}; }
  size_t extent() const;  // the end of the last-ending block
  size_t total() const;   // the sum of the counts
  // counts with packed displacements (block j right after block j-1; a displacement beyond
  // SIZE_MAX saturates, for argument checks to refuse).
  static Blocks packed(std::vector<size_t> counts);
  // nranks blocks of `count` elements, packed.
  static Blocks uniform(size_t count, int nranks);
};

// The blocks a v-form's call names on this rank (MPI's rule: a rank knows only what its own
// arguments say, so these differ between ranks for alltoallv, gatherv and scatterv):
//  alltoallv: send block j goes to rank j; recv block j comes from rank j;
//  gatherv: recv block j (root only) receives rank j's desc.count elements;
//  scatterv: send block j (root only) goes to rank j, which receives desc.count elements;
//  allgatherv: recv block j is rank j's (every rank), its input recv.count(rank) elements;
//  reducescatterv: send block j (packed, every rank) is reduced into rank j's recv.
struct BlockLayout {
  Blocks send, recv;
};

// What a collective call asks for, independent of buffers' addresses.
struct CollectiveDesc {
  OpType op = OpType::allreduce;
  size_t count = 0;  // allreduce/broadcast/reduce: elements; reducescatter: recvcount;
                     // allgather: sendcount; send/recv: elements; alltoall, gather, scatter:
                     // elements per block; gatherv: sendcount; scatterv: recvcount;
                     // allgatherv, reducescatterv: the sum of the counts; alltoallv: the
                     // sum of the send counts
  int nranks = 1;
  int root = 0;      // broadcast/reduce/gather(v)/scatter(v) root; send/recv peer
  RedOp redop = RedOp::sum;
  bool in_place = false;
  const Topology* topology = nullptr;  // null: every rank on one host
  int nchannels = 1;                   // parallel links per peer a builder may spread over
  // The v-forms' blocks (null for the other collectives: a desc stays cheap to copy).
  std::shared_ptr<const BlockLayout> blocks;
  RegionShape region;  // shm-direct's window (chunk_elements 0: RegionShape::defaults())
  bool registered = false;  // this rank's buffers are registered (zero copy where every rank's are)
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
// Reduce to rank 0 in scratch, then rank 0 sends each rank its block.
RankSchedule naive_reducescatter(const CollectiveDesc& desc, int rank);
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
// Reduce to each host's first rank, recursive doubling among those leaders, send back inside
// each host: few hand-overs, for small vectors on hosts of several ranks (see leaders.cc).
RankSchedule leaders_allreduce(const CollectiveDesc& desc, int rank);
// The same reduction, the leaders trade the sums of each other's blocks, each hands its host's
// ranks their blocks; and the AllGather through the leaders: blocks to the leader, across the
// leaders, the whole back. Across hosts only the other hosts' blocks move (leaders.cc).
RankSchedule leaders_reducescatter(const CollectiveDesc& desc, int rank);
RankSchedule leaders_allgather(const CollectiveDesc& desc, int rank);
// AllToAll through the leaders: blocks for the host's ranks go straight to them, the others to
// the leader, one message between each two leaders, the leader hands each rank its blocks.
RankSchedule leaders_alltoall(const CollectiveDesc& desc, int rank);

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

// ---- the rest of the collective set (begin) ------------------------------------------------

// AllToAll(v), pairwise: the own block is a local copy; at step k (1..N-1) rank r sends its block
// for r+k and receives the block of r-k. In place (AllToAll) the input is first copied to scratch.
RankSchedule pairwise_alltoall(const CollectiveDesc& desc, int rank);
// AllToAll, Bruck: ceil(log2 N) steps; at step k every block whose (rotated) index has bit k
// set moves 2^k ranks on, through two scratch copies of the buffer (see alltoall.cc).
RankSchedule bruck_alltoall(const CollectiveDesc& desc, int rank);
// Gather(v) / Scatter(v), linear: the root receives from (sends to) every rank at once.
RankSchedule linear_gather(const CollectiveDesc& desc, int rank);
RankSchedule linear_scatter(const CollectiveDesc& desc, int rank);
// Gather / Scatter, binomial tree over ranks relative to the root: ceil(log2 N) steps, inner
// ranks forward their subtree's blocks through scratch (see gather_scatter.cc).
RankSchedule binomial_gather(const CollectiveDesc& desc, int rank);
RankSchedule binomial_scatter(const CollectiveDesc& desc, int rank);
// Ring AllGatherv and ReduceScatterv: ring_allgather and ring_reducescatter on uneven blocks.
RankSchedule ring_allgatherv(const CollectiveDesc& desc, int rank);
RankSchedule ring_reducescatterv(const CollectiveDesc& desc, int rank);
// AllGatherv pairwise: at step k rank r sends its block to r+k and receives r-k's.
RankSchedule pairwise_allgatherv(const CollectiveDesc& desc, int rank);
// ReduceScatterv pairwise: at step k rank r sends block r+k to r+k and reduces r-k's copy of
// its own block into recv (one rank reduces each block, in a fixed order).
RankSchedule pairwise_reducescatterv(const CollectiveDesc& desc, int rank);

// ---- the rest of the collective set (end) --------------------------------------------------

// ---- shm-direct (begin) ---------------------------------------------------------------------

// The ranks of one host read one another's published data in a shared region (see direct.cc):
// small inputs through one cell per rank (each rank reduces or copies every cell, in rank
// order), large ones through pipelined slots (each rank reduces its part of a chunk reading
// every slot, then copies the others' parts), or straight from the peers' buffers (single copy).
RankSchedule direct_schedule(const CollectiveDesc& desc, int rank);
inline constexpr const char* kDirectAlgorithm = "shm-direct";

// ---- shm-direct (end) -----------------------------------------------------------------------

// What joins the ranks of a call, for the algorithms that need more than links.
struct Reach {
  bool one_host = true;       // every rank of the communicator on this host
  bool shared_memory = true;  // shared memory allowed between them (HOOP_TRANSPORT is not tcp)
};
// Whether `algorithm` can run `op` with this reach (the one place that says so); false for an
// unknown name or one that does not implement `op`.
bool runs_here(const std::string& algorithm, OpType op, const Reach& reach);
// Whether `algorithm` runs `op` over one host's shared region (shm-direct) instead of links.
bool uses_region(const std::string& algorithm, OpType op);
// Whether the tuner considers `algorithm` for `op` only when the ranks span two hosts or more
// and some host holds several (the leaders' ReduceScatter, AllGather and AllToAll); forced, it
// runs anywhere.
bool chosen_across_hosts_only(const std::string& algorithm, OpType op);
// Whether `algorithm` connects every pair of ranks for `op` and has another algorithm beside it
// (pairwise AllToAll, AllGatherv, ReduceScatterv): the tuner weighs the links' memory.
bool connects_every_pair(const std::string& algorithm, OpType op);
// Why not, for messages ("" when it does).
std::string why_not_here(const std::string& algorithm, OpType op, const Reach& reach);
// The algorithms of `op` that can run with this reach.
std::vector<std::string> algorithms_for(OpType op, const Reach& reach);

// The default algorithm for a collective (until the tuner picks among several).
RankSchedule build_default(const CollectiveDesc& desc, int rank);
// By name ("ring", "chain", ...); throws hoop::Error{invalid_argument} for an unknown name or
// one that does not implement desc.op.
RankSchedule build(const std::string& algorithm, const CollectiveDesc& desc, int rank);
std::vector<std::string> algorithms_for(OpType op);

// "send", "recv" or "scratch".
const char* buf_name(Buf b);
// A range as schedules print it: "recv[4..8)".
std::string range_text(const Range& r);

// Human-readable listing (for tools and test failure messages).
std::string to_string(const RankSchedule& s);

// Total elements this rank sends / receives over the whole schedule.
size_t elements_sent(const RankSchedule& s);
size_t elements_received(const RankSchedule& s);

}  // namespace hoop::schedule
