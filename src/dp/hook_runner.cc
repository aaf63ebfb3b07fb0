#include "dp/hook_runner.h"

namespace hoop::dp {

HookRunner::HookRunner() : thread_([this] { loop(); }) {}

HookRunner::~HookRunner() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::shared_future<void> HookRunner::run(std::function<void()> job) {
  std::packaged_task<void()> task(std::move(job));
  std::shared_future<void> done = task.get_future().share();
  {
    std::lock_guard lk(mu_);
    queue_.push_back(std::move(task));
  }
  cv_.notify_all();
  return done;
}

void HookRunner::loop() {
  std::unique_lock lk(mu_);
  for (;;) {
    cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;
    std::packaged_task<void()> task = std::move(queue_.front());
    queue_.pop_front();
    lk.unlock();
    task();  // an exception lands in the task's future
    lk.lock();
  }
}

}  // namespace hoop::dp
