// torch.distributed backend "hoop": a c10d::ProcessGroup (torch 1.13) whose collectives run on a
// hoop::Communicator. Every call issues one asynchronous hoop operation and returns a
// HoopWork at once. A completion thread settles the works in issue order (waits for them,
// copies results out of staging buffers) and never runs user code; callback threads then
// complete their futures, whose callbacks (DDP's comm hooks) may issue and wait for further
// operations of the group.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "hoop/communicator.h"
#include "shared_tensors.h"

namespace hoop_torch {

// One operation of the process group. Holds the tensors the hoop operation reads and writes
// until it has finished, and the step that moves results from staging buffers into the
// caller's tensors.
class HoopWork : public c10d::Work {
 public:
  HoopWork(int rank, c10d::OpType type, const char* profiling_title,
           std::vector<at::Tensor> outputs, std::vector<at::Tensor> keep_alive,
           std::function<void()> copy_out);

  // Attaches the issued hoop operation; called once, before the work is returned.
  void attach(hoop::Work work) { hoop_work_ = std::move(work); }
  // Makes the work a receive of exactly `bytes`: another length is an error, and
  // sourceRank() tells the sender.
  void expect_received(size_t bytes) { expected_bytes_ = bytes; }

  // Completion in three steps, errors recorded, not thrown. claim(): takes the work for
  // completion, false when another thread already did. settle(): waits for the hoop
  // operation and copies results out. publish(): completes the future, running its callbacks
  // on this thread, then the Work.
  bool claim();
  void settle();
  void publish();
  // The three on this thread; returns at once when another thread has claimed the work.
  void complete();

  bool isCompleted() override;
  int sourceRank() const override;
  std::vector<at::Tensor> result() override { return outputs_; }
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  hoop::Work hoop_work_;
  std::vector<at::Tensor> outputs_;
  std::vector<at::Tensor> keep_alive_;
  std::function<void()> copy_out_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::exception_ptr error_;
  std::optional<size_t> expected_bytes_;
  std::mutex complete_mu_;
  bool claimed_ = false;
};

class ProcessGroupHoop : public c10d::ProcessGroup {
 public:
  // Collective over the group: rendezvous through `store`, connect the ranks.
  ProcessGroupHoop(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                   std::chrono::milliseconds timeout);
  ~ProcessGroupHoop() override;

  const std::string getBackendName() const override { return "hoop"; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  // Data movement with lists of tensors or uneven blocks (process_group_hoop_exchange.cc).
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& output_lists, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_split_sizes,
                                               std::vector<int64_t>& input_split_sizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;

  hoop::Communicator& communicator() { return *comm_; }
  const std::shared_ptr<hoop::Communicator>& shared_communicator() const { return comm_; }

  // Waits until every work issued so far has been completed and released, or until `limit`
  // passes; true when it did.
  bool drain(std::chrono::milliseconds limit);

 private:
  // A sparse COO tensor, summed (process_group_hoop_exchange.cc).
  c10::intrusive_ptr<c10d::Work> sparse_allreduce(at::Tensor& tensor, const c10d::AllreduceOptions& opts);
  c10::intrusive_ptr<c10d::Work> receive(std::vector<at::Tensor>& tensors, int src, int tag,
                                         c10d::OpType type, const char* op);
  // Queues the work for the completion thread and returns it.
  c10::intrusive_ptr<c10d::Work> track(c10::intrusive_ptr<HoopWork> work);
  void completion_loop();
  // Publishes settled works. A callback may block until a later work is published, so every
  // settled work waiting in settled_ has an idle callback thread of its own: the completion
  // thread starts one when there are more waiting works than idle threads.
  void callback_loop();
  // Under mu_: nothing is pending, settled or in a thread's hands.
  bool all_released() const { return pending_.empty() && settled_.empty() && in_hand_ == 0; }

  std::shared_ptr<hoop::Communicator> comm_;
  std::unique_ptr<SharedTensors> shared_;  // share_memory_() tensors registered with comm_
  std::mutex mu_;
  std::condition_variable cv_;           // pending_ grew, or stop_
  std::condition_variable callback_cv_;  // settled_ grew, or settling_done_
  std::condition_variable drained_cv_;   // all_released() became true
  std::deque<c10::intrusive_ptr<HoopWork>> pending_;
  std::deque<c10::intrusive_ptr<HoopWork>> settled_;
  int in_hand_ = 0;  // works taken from pending_ or settled_ and not yet released
  int idle_callback_threads_ = 0;
  bool stop_ = false;
  bool settling_done_ = false;  // the completion thread has settled its last work
  std::thread completer_;
  std::vector<std::thread> callback_threads_;  // started by the completion thread
};

// Drains every live hoop process group (at most `limit` each): run at interpreter exit, before
// Python stops handing the GIL to other threads, since releasing a tensor Python owns needs it.
void drain_all_process_groups(std::chrono::milliseconds limit);

// The backend's creator, as torch.distributed.Backend.register_backend calls it.
c10::intrusive_ptr<c10d::ProcessGroup> create_process_group(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
    std::chrono::milliseconds timeout);

}  // namespace hoop_torch
