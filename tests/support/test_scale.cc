#include "support/test_scale.h"

#include <cstdlib>
#include <string_view>

namespace hoop::test {

bool small_scale() {
  const char* scale = std::getenv("HOOP_TEST_SCALE");
  return scale != nullptr && std::string_view(scale) == "small";
}

std::vector<int> rank_counts_up_to(int max_ranks) {
  std::vector<int> counts;
  for (int n = 1; n <= max_ranks; ++n) {
    const bool boundary = n <= 16 || n == 17 || n == 31 || n == 32 || n == 33 || n == 63 || n == max_ranks;
    if (!small_scale() || boundary) counts.push_back(n);
  }
  return counts;
}

}  // namespace hoop::test
