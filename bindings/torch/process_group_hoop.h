// torch.distributed backend "hoop": a c10d::ProcessGroup (torch 1.13) whose collectives run on a
// hoop::Communicator. Every call issues one asynchronous hoop operation and returns a
// HoopWork at once; a completion thread finishes the works in issue order (copies results
// out of staging buffers, completes the futures DDP chains on).
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "hoop/communicator.h"

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

  // Waits for the hoop operation, copies results out, completes the future and the Work.
  // Idempotent and safe from several threads; errors are recorded, not thrown.
  void complete();

  bool isCompleted() override;
  std::vector<at::Tensor> result() override { return outputs_; }
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  hoop::Work hoop_work_;
  std::vector<at::Tensor> outputs_;
  std::vector<at::Tensor> keep_alive_;
  std::function<void()> copy_out_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::mutex complete_mu_;
  bool completing_ = false;
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
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;

  hoop::Communicator& communicator() { return *comm_; }

  // Waits until the completion thread has finished and released every work issued so far, or
  // until `limit` passes; true when it did.
  bool drain(std::chrono::milliseconds limit);

 private:
  // Queues the work for the completion thread and returns it.
  c10::intrusive_ptr<c10d::Work> track(c10::intrusive_ptr<HoopWork> work);
  void completion_loop();

  std::shared_ptr<hoop::Communicator> comm_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<c10::intrusive_ptr<HoopWork>> pending_;
  bool busy_ = false;  // the completion thread holds a work taken from pending_
  bool stop_ = false;
  std::thread completer_;
};

// Drains every live hoop process group (at most `limit` each): run at interpreter exit, before
// Python stops handing the GIL to other threads, since releasing a tensor Python owns needs it.
void drain_all_process_groups(std::chrono::milliseconds limit);

// The backend's creator, as torch.distributed.Backend.register_backend calls it.
c10::intrusive_ptr<c10d::ProcessGroup> create_process_group(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
    std::chrono::milliseconds timeout);

}  // namespace hoop_torch
