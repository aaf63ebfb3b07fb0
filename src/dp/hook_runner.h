// The hook thread: runs gradient-bucket hooks one after the other, in the order they were
// queued, while the trainer's thread goes on with backward. Each job's end (or its exception)
// is a shared_future.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>

namespace hoop::dp {

class HookRunner {
 public:
  HookRunner();
  // Finishes the queued jobs, then stops.
  ~HookRunner();
  HookRunner(const HookRunner&) = delete;
  HookRunner& operator=(const HookRunner&) = delete;

  std::shared_future<void> run(std::function<void()> job);

 private:
  void loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::packaged_task<void()>> queue_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace hoop::dp
