// Times the collectives of a training step without touching their path: a watcher thread
// waits on each Work in issue order (a communicator completes its operations in that order)
// and stamps its end. A step's communication time is the union of [issue, end] of its
// collectives; the exposed part is what the trainer spent blocked in wait(); the rest ran
// hidden behind compute. A bucket's communication hook counts as one collective, from its
// queueing to its end (its compression work included).
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "hoop/communicator.h"
#include "hoop/dp.h"

namespace hoop::dp {

class CommTimer {
 public:
  CommTimer();
  ~CommTimer();
  CommTimer(const CommTimer&) = delete;
  CommTimer& operator=(const CommTimer&) = delete;

  // Registers a collective just issued (or a hook just queued).
  void issued(const Work& work);
  void issued(const std::shared_future<void>& done);
  // Blocks on `work`, counting the time as exposed (rethrows its error).
  void wait(Work& work);
  void wait(const std::shared_future<void>& done);
  // Closes the step: waits until the watcher stamped every collective, returns its timing
  // and starts a new step.
  CommTiming finish_step();

 private:
  using Clock = std::chrono::steady_clock;
  struct Item {
    std::function<void()> wait;  // blocks until the collective ended (errors ignored)
    Clock::time_point issued;
    Clock::time_point ended;
  };
  void issued(std::function<void()> wait);
  void exposed(Clock::time_point since);
  void watch();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> pending_;     // not yet stamped, issue order
  std::vector<Item> stamped_;    // this step's, stamped
  double exposed_ = 0;
  bool stop_ = false;
  std::thread watcher_;
};

}  // namespace hoop::dp
