// Per-rank blocks of the v-forms' buffers.
#include <algorithm>
#include <cstdint>

#include "schedule/schedule.h"

namespace hoop::schedule {

size_t Blocks::extent() const {
  size_t end = 0;
  for (size_t j = 0; j < counts.size(); ++j) end = std::max(end, displs[j] + counts[j]);
  return end;
}

size_t Blocks::total() const {
  size_t sum = 0;
  for (size_t c : counts) sum += c;
  return sum;
}

Blocks Blocks::packed(std::vector<size_t> counts) {
  Blocks b;
  b.displs.reserve(counts.size());
  size_t at = 0;
  for (size_t c : counts) {
    b.displs.push_back(at);
    at = c > SIZE_MAX - at ? SIZE_MAX : at + c;
  }
  b.counts = std::move(counts);
  return b;
}

Blocks Blocks::uniform(size_t count, int nranks) {
  return packed(std::vector<size_t>(static_cast<size_t>(nranks), count));
}

}  // namespace hoop::schedule
