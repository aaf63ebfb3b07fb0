// Completion state shared by an operation in the engine's queue and the Work handles to it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <optional>

#include "comm/failure.h"
#include "hoop/communicator.h"

namespace hoop::detail {

class WorkState {
 public:
  explicit WorkState(uint64_t seq) : seq_(seq) {}

  void finish(std::exception_ptr error) { finish(Failure::of(error)); }
  void finish(Failure error) {
    {
      std::lock_guard lk(mu_);
      done_ = true;
      error_ = std::move(error);
    }
    cv_.notify_all();
  }

  // True when done (rethrowing the error); false if `limit` passed first.
  bool wait_for(std::chrono::nanoseconds limit) {
    std::unique_lock lk(mu_);
    if (!cv_.wait_for(lk, limit, [&] { return done_; })) return false;
    if (error_) error_.raise();
    return true;
  }

  void wait() {
    std::unique_lock lk(mu_);
    cv_.wait(lk, [&] { return done_; });
    if (error_) error_.raise();
  }

  uint64_t seq() const { return seq_; }

  // A receive's outcome, set before finish().
  void set_status(const RecvStatus& s) {
    std::lock_guard lk(mu_);
    status_ = s;
  }
  // Whether it finished, and its status if it is a receive that succeeded.
  std::pair<bool, std::optional<RecvStatus>> status() {
    std::lock_guard lk(mu_);
    return {done_, status_};
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  Failure error_;
  std::optional<RecvStatus> status_;
  uint64_t seq_;
};

}  // namespace hoop::detail
