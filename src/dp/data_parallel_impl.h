// The data-parallel engine behind hoop::dp::DataParallel (see include/hoop/dp.h).
#pragma once

#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "dp/comm_timer.h"
#include "dp/hook_runner.h"
#include "dp/layout.h"
#include "dp/memory.h"
#include "dp/state_image.h"
#include "hoop/dp.h"

namespace hoop::dp::detail {

class DataParallelImpl {
 public:
  DataParallelImpl(std::shared_ptr<Communicator> comm, DpConfig config);
  // Waits for the collectives still writing into its buffers (errors ignored).
  ~DataParallelImpl();
  DataParallelImpl(const DataParallelImpl&) = delete;
  DataParallelImpl& operator=(const DataParallelImpl&) = delete;

  int register_param(const std::string& name, const std::vector<size_t>& shape, int layer,
                     const float* initial);
  void register_comm_hook(std::shared_ptr<CommHook> hook);
  void finalize();
  const float* layer_params(int layer, Phase phase);
  void release_layer(int layer, Phase phase);
  void layer_grads(int layer, const float* grads);
  void step();
  std::vector<float> gather_tensor(int tensor);
  void save(const std::string& dir);
  void load(const std::string& dir);
  // Images (dp/state_image.h): their shape on `ranks` ranks, this rank's written to dst
  // (image_layout(nranks_).elements(rank_) floats), and the states read back from any source.
  ImageLayout image_layout(int ranks) const;
  void write_image(float* dst);
  void load_states(StateSource& source);
  // Redundancy (recovery.cc): the next commit's images (this rank's and, from it, its
  // successor's), made the last commit's by promote_commit().
  void prepare_commit();
  void promote_commit();

  // --- state, read by the public wrapper and the checkpoint code ---
  std::shared_ptr<Communicator> comm_;
  DpConfig cfg_;
  int rank_ = 0;
  int nranks_ = 1;
  DataType pdt_ = DataType::f32;  // parameters and gradients
  bool mixed_ = false;            // f32 master weights
  Layout layout_;
  bool finalized_ = false;
  uint64_t steps_ = 0;
  MemoryLedger ledger_;
  // Registered memory for the buffers the collectives read and write (DpConfig::registered),
  // declared before them: they give their memory back to it.
  std::unique_ptr<RegisteredPool> pool_;
  RegisteredPool* pool() const { return pool_.get(); }
  std::unique_ptr<CommTimer> timer_;
  CommTiming last_timing_;
  std::vector<BucketInfo> bucket_info_;
  std::vector<int> launch_order_;
  std::shared_ptr<CommHook> hook_;  // null: plain AllReduce / ReduceScatter
  // Redundancy: the last commit's images (this rank's, its ring successor's) and the next's.
  TrackedBuffer committed_own_, committed_successor_, next_own_, next_successor_;
  uint64_t committed_step_ = 0;
  double last_recovery_seconds_ = 0;

 private:
  struct LaunchedBucket {
    int bucket = 0;
    Work work;
    std::shared_future<void> hooked;  // the bucket's hook, when one is installed
    TrackedBuffer staging;  // stages 2, 3: the packed bucket, freed once reduced
    bool done();
    void wait(CommTimer* timer);
  };
  struct GatheredLayer {
    Work work;
    TrackedBuffer packed;  // N segments as gathered
    TrackedBuffer view;    // f32 view of the layer, once unpacked
    bool unpacked = false;
  };

  size_t pbytes() const { return dtype_size(pdt_); }
  bool zero() const { return cfg_.stage >= 1; }
  size_t domain() const { return zero() ? layout_.shard : layout_.numel; }
  // The f32 values the optimizer updates for tensor t (the master weights or the parameters).
  float* master_ptr(int t);
  const void* grad_ptr(int t);
  void launch_bucket(int b);
  CommHookContext hook_context() const;
  std::shared_future<void> launch_hook(int b, std::byte* segments, std::byte* shard);
  void wait_buckets();
  void gather_params_after_update();
  void start_gather(int layer);
  const float* finish_gather(int layer);
  // Copies rank q's slice of tensor t (from its full values `src`) into segment q of a packed
  // group buffer, for every q.
  void pack_tensor(const Group& g, int t, const float* src, std::byte* packed) const;
  // The reverse for every tensor of g: full values at dst + offset(t), in dst_dt.
  template <class Offset>
  void unpack_group(const Group& g, const std::byte* packed, std::byte* dst, DataType dst_dt,
                    Offset offset) const;
  size_t flat(int t) const;  // offset of tensor t among all parameters, registration order
  void set_initial(const std::vector<float>& full);
  void set_params_from_full(int t, const float* full);  // parameters (+ master) of tensor t
  void publish_updated(int t, std::byte* send_staging);
  void check_layer(int layer, const char* op) const;
  void load_hook_state(const std::string& dir, const nlohmann::json& manifest, int old_ranks);
  ErrorContext ctx(const char* op) const;

  std::vector<std::vector<float>> initial_;  // registration order, until finalize
  // Parameters: stages 0-2 full (layer views back to back); stage 3 this rank's shard.
  TrackedBuffer params_;
  // Gradients: stage 0 full in bucket order; stage 1 full, each bucket as N segments;
  // stages 2-3 this rank's shard.
  TrackedBuffer grads_;
  TrackedBuffer master_;  // mixed precision: f32 copy of what this rank updates
  TrackedBuffer state0_, state1_;
  std::vector<TrackedBuffer> filling_;  // stages 2-3: per bucket, packed as gradients arrive
  std::vector<int> pending_;      // per bucket: tensors whose gradient is still missing
  size_t next_bucket_ = 0;        // the next bucket to start
  std::vector<bool> grads_given_;  // per layer, this step
  std::vector<LaunchedBucket> launched_;
  std::map<int, GatheredLayer> gathered_;  // stage 3
  std::vector<std::optional<TrackedBuffer>> layer_f32_;  // bf16 stages 0-2, per layer
  std::vector<GradBucket> hook_buckets_;  // per bucket, what the hook is given (stage 0 data)
  std::unique_ptr<HookRunner> hook_runner_;
};

}  // namespace hoop::dp::detail
