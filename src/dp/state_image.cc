#include "dp/state_image.h"

#include <algorithm>
#include <cstring>

namespace hoop::dp {

size_t slice_of(size_t numel, int ranks) {
  return (numel + static_cast<size_t>(ranks) - 1) / static_cast<size_t>(ranks);
}

size_t valid_of(size_t numel, size_t slice, int q) {
  const size_t b = static_cast<size_t>(q) * slice;
  return b >= numel ? 0 : std::min(slice, numel - b);
}

ImageLayout::ImageLayout(std::vector<size_t> numels, int ranks, int nstates)
    : numels_(std::move(numels)), ranks_(ranks), nstates_(nstates) {}

size_t ImageLayout::before(int q, size_t t) const {
  size_t off = 0;
  for (size_t i = 0; i < t; ++i) {
    off += valid_of(numels_[i], slice_of(numels_[i], ranks_), q) * static_cast<size_t>(nstates_);
  }
  return off;
}

size_t ImageLayout::offset(int q, size_t t, int k) const {
  return before(q, t) + static_cast<size_t>(k) * valid_of(numels_[t], slice_of(numels_[t], ranks_), q);
}

size_t ImageLayout::elements(int q) const { return before(q, numels_.size()); }

void StateSource::read(size_t t, int k, size_t lo, size_t hi, float* dst) {
  const size_t n = layout_.numels()[t], s = slice_of(n, layout_.ranks());
  for (int q = 0; q < layout_.ranks() && lo < hi; ++q) {
    const size_t qb = static_cast<size_t>(q) * s, qe = qb + valid_of(n, s, q);
    const size_t a = std::max(lo, qb), e = std::min(hi, qe);
    if (a >= e) continue;
    fetch(q, layout_.offset(q, t, k) + (a - qb), e - a, dst + (a - lo));
  }
}

void MemoryStateSource::fetch(int q, size_t at, size_t count, float* dst) {
  std::memcpy(dst, images_[static_cast<size_t>(q)].data() + at, count * sizeof(float));
}

}  // namespace hoop::dp
