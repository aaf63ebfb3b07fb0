// How much ground a test covers. The sanitizer runs (`make test-asan`, `make test-tsan`) set
// HOOP_TEST_SCALE=small: the same checks on fewer sizes, because ASan and UBSan make pure
// computation ten times slower or more, and `make test` covers the whole ground.
#pragma once

#include <vector>

namespace hoop::test {

bool small_scale();

// 1..max_ranks; under small_scale() 1..16 and, above, the counts where shapes change (primes,
// powers of two and their neighbours) and max_ranks itself.
std::vector<int> rank_counts_up_to(int max_ranks);

}  // namespace hoop::test
