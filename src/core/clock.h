// Monotonic time helpers shared by every layer that waits.
#pragma once

#include <chrono>

namespace hoop {

using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;

inline double seconds_between(TimePoint a, TimePoint b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace hoop
