#include <algorithm>

#include "schedule/schedule.h"

namespace hoop::schedule {

size_t Chunking::offset(int i) const {
  const size_t p = static_cast<size_t>(parts);
  const size_t idx = static_cast<size_t>(i);
  const size_t base = count / p;
  return base * idx + std::min(idx, count % p);
}

}  // namespace hoop::schedule
