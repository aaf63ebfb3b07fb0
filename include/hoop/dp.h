// Data-parallel training on a communicator: DDP (ZeRO stage 0) and ZeRO stages 1, 2 and 3.
//
// A model registers its parameter tensors (name, element count, the layer they belong to) and
// then, every step, asks for each layer's parameters before using them and hands over each
// layer's gradients as backward produces them, from the last layer to the first:
//
//   hoop::dp::DataParallel dp(comm, config);
//   for (each tensor) dp.register_param(name, numel, layer, initial_values);
//   dp.finalize();                          // broadcast from rank 0, shard, allocate states
//   each step:
//     for l = 0..L-1:   p = dp.layer_params(l, Phase::forward);  ... dp.release_layer(l, ...)
//     for l = L-1..0:   p = dp.layer_params(l, Phase::backward); ... dp.layer_grads(l, g);
//                       dp.release_layer(l, Phase::backward)
//     dp.step();                            // waits for what is still in flight, updates
//
// Stage 0 (DDP): every rank holds everything; gradients go into buckets in reverse
// registration order (first bucket `first_bucket_bytes`, then `bucket_bytes`); a bucket's
// AllReduce (average) starts as soon as its last gradient arrives, while backward goes on.
// Stage 1: optimizer states sharded; gradients still complete on every rank, ReduceScattered
// bucket by bucket; each rank updates its shard, then AllGather.
// Stage 2: as 1, but a rank keeps only its gradient shard (buckets are staged and freed).
// Stage 3: as 2, and parameters are sharded too: each layer is AllGathered before its forward
// and again before its backward (the next layer prefetched), and released after use.
//
// Sharding: every tensor of n elements is padded to a multiple of N and rank r owns elements
// [r*ceil(n/N), (r+1)*ceil(n/N)). A rank's shard is the concatenation of its slices in bucket
// order, so the owner of an element never depends on bucket sizes or stage: stages 1, 2 and 3
// reduce every element in the same order and give bit-identical results.
//
// Communication hooks (as DDP's register_comm_hook): a CommHook replaces the averaging of each
// gradient bucket (AllReduce at stage 0, ReduceScatter at stages 1 and 2) by its own exchange,
// e.g. gradients compressed on the wire. DpConfig::compress selects a built-in hook ("none",
// "bf16", "fp16", "powersgd:4", "onebit"); register_comm_hook() installs any other. Hooks run
// on the engine's hook thread, bucket after bucket in bucket order, while backward goes on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hoop/communicator.h"
#include "hoop/export.h"

namespace hoop::dp {

enum class Precision : uint8_t {
  f32,   // f32 parameters, gradients and states
  bf16,  // bf16 parameters and gradients, f32 master weights and states (mixed precision)
};

enum class OptimizerKind : uint8_t { sgd, adam, adamw };

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::adam;
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;  // adam: added to the gradient; adamw: decoupled; sgd: L2
  float momentum = 0.0f;      // sgd only; 0: no momentum buffer
};

struct DpConfig {
  int stage = 0;  // 0 (DDP), 1, 2, 3
  Precision precision = Precision::f32;
  OptimizerConfig optimizer;
  size_t first_bucket_bytes = size_t{1} << 20;
  size_t bucket_bytes = size_t{25} << 20;
  bool prefetch = true;  // stage 3: gather layer l+1 (forward) / l-1 (backward) ahead
  OpOptions op_options;  // for every collective (e.g. algo = "ring")
  // Gradient communication hook: "none" (AllReduce / ReduceScatter of the gradients as they
  // are), "bf16" / "fp16" (16 bits on the wire, f32 sums rounded once), "powersgd[:r][:warmup=K]"
  // (rank-r PowerSGD with error feedback, r = 4 by default, stage 0), "onebit[:warmup=K]
  // [:chunk=C]" (signs and a scale per chunk of C elements, error feedback, stage 0; with
  // Adam and K > 0, 1-bit Adam: the momentum compressed, the variance frozen after K steps).
  // K = 10 and C = 256 by default.
  // Checked at construction (and against the parameters' shapes at finalize()).
  std::string compress = "none";
  // Surviving a dead rank without a restart (DataParallel::commit): 1 keeps, in memory, a copy
  // of the ring successor's states (the image a checkpoint would write: its slices of the
  // master weights or parameters and of the optimizer's arrays), refreshed by every commit;
  // 0: none (a dead rank's shard is lost).
  int redundancy = 0;
  // Gradients, parameters, buckets and gathered layers in registered memory
  // (Communicator::alloc, kept for reuse across steps): on one host the collectives read and
  // write the peers' buffers in place (zero copy).
  bool registered = true;
};

enum class Phase : uint8_t { forward, backward };

// Bytes of model states per rank, by kind. "comm" holds buckets, gathered layers and staging
// buffers; "model_states" = params + grads + optimizer, the quantity of the ZeRO formulas.
struct MemoryUsage {
  uint64_t params = 0;
  uint64_t grads = 0;
  uint64_t optimizer = 0;  // master weights, moments, momentum
  uint64_t comm = 0;
  uint64_t redundancy = 0;  // the last committed states of this rank and of its successor, and the next
  uint64_t model_states() const { return params + grads + optimizer; }
  uint64_t total() const { return model_states() + comm + redundancy; }
};

struct MemoryReport {
  MemoryUsage current;
  MemoryUsage peak;         // per kind, each its own maximum
  uint64_t peak_total = 0;  // the maximum of current.total()
};

// Bytes per parameter of each model state: P (parameters), G (gradients), K (optimizer).
struct StateBytes {
  double params = 4, grads = 4, optimizer = 8;
};
HOOP_API StateBytes state_bytes(Precision p, const OptimizerConfig& opt);
// The ZeRO paper's model-state bytes per rank for `psi` parameters on `ranks` ranks:
// stage 0 (P+G+K)psi, 1 (P+G)psi + K psi/N, 2 P psi + (G+K) psi/N, 3 (P+G+K) psi/N.
HOOP_API double model_state_bytes_formula(int stage, double psi, int ranks, const StateBytes& b);

// One collective as seen by the step timer.
struct CommTiming {
  double comm_seconds = 0;     // time some collective of the step was in flight
  double exposed_seconds = 0;  // time the caller spent waiting for collectives
  double hidden_seconds() const {
    return comm_seconds > exposed_seconds ? comm_seconds - exposed_seconds : 0;
  }
};

struct BucketInfo {
  std::vector<int> tensors;  // registration indices, in the order they were packed
  size_t bytes = 0;          // gradient bytes (unpadded)
};

// ---------------------------------------------------------------- communication hooks

// A parameter tensor inside a gradient bucket.
struct BucketTensor {
  int tensor = 0;             // registration index
  std::string name;
  std::vector<size_t> shape;  // as registered: {n} for a vector, {rows, cols} for a matrix
  size_t offset = 0;          // of its first element in the bucket
  size_t numel = 0;
};

// Stage 0: a bucket's gradients, its tensors back to back; the hook replaces them with their
// average over the ranks, the same bits on every rank.
struct GradBucket {
  int index = 0;
  void* data = nullptr;
  DataType dtype = DataType::f32;  // f32, or bf16 in mixed precision
  size_t numel = 0;
  std::vector<BucketTensor> tensors;
};

// Stages 1 and 2: a bucket as N segments of `seg` elements (segment q: rank q's slices of the
// bucket's tensors, zero-padded); the hook writes the average of segment `rank` into `shard`.
struct ShardedGradBucket {
  int index = 0;
  const void* segments = nullptr;
  void* shard = nullptr;
  DataType dtype = DataType::f32;
  size_t seg = 0;
};

struct CommHookContext {
  Communicator* comm = nullptr;  // null: one process (the hook averages over one rank)
  int rank = 0;
  int size = 1;
  uint64_t step = 0;  // steps completed before this backward (0 in the first step)
  OpOptions op_options;
  const OptimizerConfig* optimizer = nullptr;  // the optimizer that applies the result (null: unknown)
};

// One array of a hook's state, saved by DataParallel::save() and restored by load().
// `replicated`: the same on every rank (e.g. PowerSGD's Q), so it also loads on another rank
// count; otherwise it is this rank's own (error feedback) and restarts at zero there.
struct CommHookState {
  std::string name;
  std::vector<float>* values = nullptr;
  bool replicated = false;
};

class HOOP_API CommHook {
 public:
  virtual ~CommHook() = default;
  virtual std::string name() const = 0;
  // Whether the hook can serve this ZeRO stage (stage 0: allreduce(); 1, 2: reducescatter()).
  virtual bool supports_stage(int stage) const { return stage == 0; }
  // Once, from finalize(), with every bucket's layout (data pointers null): checks the shapes
  // (throwing hoop::Error{invalid_argument}) and allocates state.
  virtual void setup(const CommHookContext& ctx, const std::vector<GradBucket>& buckets) = 0;
  // Runs on the hook thread; may call any collective on ctx.comm (every rank runs the same
  // hooks on the same buckets in the same order). Blocking calls are fine: backward goes on
  // in the trainer's thread meanwhile.
  virtual void allreduce(const CommHookContext& ctx, GradBucket& bucket) = 0;
  virtual void reducescatter(const CommHookContext& ctx, ShardedGradBucket& bucket);
  virtual std::vector<CommHookState> state() { return {}; }
  // Bytes sent on communicators of the hook's own (split from ctx.comm at setup).
  virtual uint64_t bytes_sent() const { return 0; }
  // Adam at stage 0 only; 0: never. K > 0: from step K on (CommHookContext::step >= K),
  // allreduce() leaves in the bucket Adam's step direction m^ / (sqrt(v^) + eps), computed from
  // moments the hook keeps (the same on every rank), instead of averaged gradients; step()
  // applies param -= lr * direction and leaves the optimizer's moments as they were (1-bit
  // Adam's frozen variance).
  virtual uint64_t variance_frozen_at() const { return 0; }
};

// The built-in hook for a DpConfig::compress string; nullptr for "none". Throws
// hoop::Error{invalid_argument} for an unknown name or bad options.
HOOP_API std::shared_ptr<CommHook> make_comm_hook(const std::string& spec);

namespace detail {
class DataParallelImpl;
}

class HOOP_API DataParallel {
 public:
  // `comm` may be null: one process, no collectives (the reference for tests).
  DataParallel(std::shared_ptr<Communicator> comm, DpConfig config);
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  // Tensors of one layer must be registered together; layers in increasing order.
  // `initial` (numel f32 values) is read on rank 0 (broadcast to the others at finalize()).
  int register_param(const std::string& name, size_t numel, int layer, const float* initial);
  // The same with a shape ({rows, cols} for a matrix: what PowerSGD compresses).
  int register_param(const std::string& name, const std::vector<size_t>& shape, int layer,
                     const float* initial);
  // Replaces the hook chosen by DpConfig::compress; before finalize(). Refused (invalid_argument)
  // when the hook does not support the stage.
  void register_comm_hook(std::shared_ptr<CommHook> hook);
  void finalize();

  // f32 view of the layer's parameters (its tensors back to back, registration order), valid
  // until release_layer(layer, phase). Stage 3 gathers them (and prefetches the next layer).
  const float* layer_params(int layer, Phase phase);
  void release_layer(int layer, Phase phase);
  // Backward: the layer's gradients (its tensors back to back, f32). Copies them into the
  // bucket(s) and starts the collective of every bucket that became complete.
  void layer_grads(int layer, const float* grads);
  // Waits for the gradient collectives still in flight, updates the shard, AllGathers it.
  void step();

  // The full f32 parameters of one tensor (collective at stage 3: every rank must call).
  std::vector<float> gather_tensor(int tensor);

  // Sharded checkpoint: every rank writes its shard to `dir`, rank 0 a manifest.json.
  // load() reads a checkpoint written by any number of ranks at any stage.
  void save(const std::string& dir);
  void load(const std::string& dir);

  // Surviving a dead rank (DpConfig::redundancy = 1), after each step, on every live rank:
  //
  //   bool ok = true;
  //   try { forward and backward through layer_params / layer_grads; dp.step(); }
  //   catch (const hoop::Error&) { ok = false; }
  //   if (!dp.commit(ok)) { the states are back at the last commit, over the survivors: redo the step }
  //
  // commit(true) refreshes the in-memory copies and, once every member agrees
  // (Communicator::agree), makes this step the last commit. Otherwise (this rank or another
  // failed: it revokes the communicator, so that no member waits on it) the members shrink the
  // communicator to the live ones, restore every shard from its owner or from the copy its
  // ring predecessor holds, re-shard over the new rank count, and return false: no half-reduced
  // gradient and no half-applied update is kept. (A member dying just after the agreement
  // leaves the step committed: steps_done() then says which step comes next.) With two neighbours dead, both copies of a
  // shard are gone: Error{peer_failure} names the shard and the ranks. A communication hook's
  // state restarts on the survivors.
  bool commit(bool ok);
  // A process that joined a running job (Communicator::join; hoop-run --elastic starts one in
  // place of a dead rank): registers the model as the members did, then calls this instead of
  // finalize(). The members admit it at their next commit (commit() grows the communicator when
  // newcomers wait) and re-shard over the larger group; it gets its shard and the step count
  // from them, no disk read.
  void join_group();
  // The communicator in use (the survivors' one after a recovery).
  std::shared_ptr<Communicator> communicator() const;
  // Seconds the last recovery took, from the agreement that failed to the restored states.
  double last_recovery_seconds() const;

  int stage() const;
  int rank() const;
  int world_size() const;
  size_t num_tensors() const;
  size_t num_params() const;     // psi, unpadded
  size_t shard_elements() const; // this rank's padded shard (psi/N rounded up per tensor)
  uint64_t steps_done() const;
  const std::vector<BucketInfo>& buckets() const;
  // Observability: collectives issued for gradient buckets so far in this backward, and the
  // bucket index of each in issue order (cleared by step()).
  size_t buckets_launched() const;
  const std::vector<int>& launch_order() const;
  MemoryReport memory() const;
  double model_state_formula_bytes() const;
  // Timing of the last completed step's collectives.
  CommTiming last_step_comm() const;
  // Payload bytes this rank sent so far: the communicator's stats() plus the hook's own
  // communicators (0 without a communicator).
  uint64_t bytes_sent() const;

 private:
  // The recovery half of commit(), and join_group(): collective on the new communicator (the
  // survivors', or the grown one), whose members bring the last commit's states.
  void recover(std::shared_ptr<Communicator> next);
  std::unique_ptr<detail::DataParallelImpl> impl_;
};

}  // namespace hoop::dp
