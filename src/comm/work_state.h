// Completion state shared by an operation in the engine's queue and the Work handles to it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>

namespace hoop::detail {

class WorkState {
 public:
  explicit WorkState(uint64_t seq) : seq_(seq) {}

  void finish(std::exception_ptr error) {
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
    if (error_) std::rethrow_exception(error_);
    return true;
  }

  void wait() {
    std::unique_lock lk(mu_);
    cv_.wait(lk, [&] { return done_; });
    if (error_) std::rethrow_exception(error_);
  }

  uint64_t seq() const { return seq_; }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::exception_ptr error_;
  uint64_t seq_;
};

}  // namespace hoop::detail
