// How much ground a test covers. The sanitizer runs (`make test-asan`, `make test-tsan`) set
// HOOP_TEST_SCALE=small: the same checks on fewer sizes, because ASan and UBSan make pure
// computation ten times slower or more, and `make test` covers the whole ground.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

namespace hoop::test {

// Sanitizers slow every step of a run several-fold (ThreadSanitizer ten-fold and more, with 4-8
// ranks on 2 cores). A bound on wall time is a claim about the release build; under a sanitizer
// it stretches by this factor, and so does a short timeout a test sets to watch it fire.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
constexpr double kSanitizerTimeFactor = kSanitized ? 4.0 : 1.0;

// The bound a test puts on wall time: `release_seconds` in the release build, stretched under a
// sanitizer. Every upper bound on elapsed time in the suites goes through it.
constexpr double wall_bound(double release_seconds) { return release_seconds * kSanitizerTimeFactor; }
// The same for a timeout that only guards against a deadlock (a communicator's, say): it must
// not fire on a run that is merely slow under a sanitizer.
template <class Rep, class Period>
constexpr std::chrono::milliseconds wall_bound(std::chrono::duration<Rep, Period> release) {
  return std::chrono::milliseconds(
      static_cast<int64_t>(std::chrono::duration<double, std::milli>(release).count() * kSanitizerTimeFactor));
}

bool small_scale();

// 1..max_ranks; under small_scale() 1..16 and, above, the counts where shapes change (primes,
// powers of two and their neighbours) and max_ranks itself.
std::vector<int> rank_counts_up_to(int max_ranks);

}  // namespace hoop::test
