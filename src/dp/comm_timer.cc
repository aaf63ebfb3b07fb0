#include "dp/comm_timer.h"

#include <algorithm>
#include <exception>

namespace hoop::dp {

CommTimer::CommTimer() : watcher_([this] { watch(); }) {}

CommTimer::~CommTimer() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  watcher_.join();
}

void CommTimer::issued(const Work& work) {
  issued([w = work]() mutable {
    try {
      w.wait();
    } catch (const std::exception&) {
      // The trainer sees the error through its own wait; here only the end time matters.
    }
  });
}

void CommTimer::issued(const std::shared_future<void>& done) {
  issued([done] { done.wait(); });
}

void CommTimer::issued(std::function<void()> wait) {
  {
    std::lock_guard lk(mu_);
    pending_.push_back(Item{std::move(wait), Clock::now(), {}});
  }
  cv_.notify_all();
}

void CommTimer::exposed(Clock::time_point since) {
  const double s = std::chrono::duration<double>(Clock::now() - since).count();
  std::lock_guard lk(mu_);
  exposed_ += s;
}

void CommTimer::wait(Work& work) {
  const auto t0 = Clock::now();
  work.wait();
  exposed(t0);
}

void CommTimer::wait(const std::shared_future<void>& done) {
  const auto t0 = Clock::now();
  done.wait();
  exposed(t0);
  done.get();
}

void CommTimer::watch() {
  std::unique_lock lk(mu_);
  for (;;) {
    cv_.wait(lk, [&] { return stop_ || !pending_.empty(); });
    if (pending_.empty()) return;  // stop requested, nothing left
    const std::function<void()> wait = pending_.front().wait;
    lk.unlock();
    wait();
    const auto end = Clock::now();
    lk.lock();
    Item item = std::move(pending_.front());
    pending_.pop_front();
    item.ended = end;
    stamped_.push_back(std::move(item));
    cv_.notify_all();
  }
}

CommTiming CommTimer::finish_step() {
  std::unique_lock lk(mu_);
  cv_.wait(lk, [&] { return pending_.empty(); });
  std::vector<Item> items = std::move(stamped_);
  stamped_.clear();
  CommTiming t;
  t.exposed_seconds = exposed_;
  exposed_ = 0;
  lk.unlock();
  // Union of the intervals (they are already sorted by issue time).
  std::sort(items.begin(), items.end(),
            [](const Item& a, const Item& b) { return a.issued < b.issued; });
  Clock::time_point cur_begin{}, cur_end{};
  bool open = false;
  for (const Item& it : items) {
    if (!open || it.issued > cur_end) {
      if (open) t.comm_seconds += std::chrono::duration<double>(cur_end - cur_begin).count();
      cur_begin = it.issued;
      cur_end = it.ended;
      open = true;
    } else {
      cur_end = std::max(cur_end, it.ended);
    }
  }
  if (open) t.comm_seconds += std::chrono::duration<double>(cur_end - cur_begin).count();
  t.exposed_seconds = std::min(t.exposed_seconds, t.comm_seconds);
  return t;
}

}  // namespace hoop::dp
