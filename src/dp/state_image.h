// A rank's model states as one f32 array, its "image": for each tensor in registration order,
// for each state (the parameters or master weights, then the optimizer's arrays), the rank's
// slice [r*ceil(n/N), min(n, (r+1)*ceil(n/N))). A checkpoint's rank_<r>.bin holds the image,
// and so does the in-memory copy a rank keeps of its ring successor's states (redundancy), so
// that states of N ranks are read back on M ranks the same way from either.
#pragma once

#include <cstddef>
#include <vector>

namespace hoop::dp {

size_t slice_of(size_t numel, int ranks);
size_t valid_of(size_t numel, size_t slice, int q);

// The shape of the images of one model on `ranks` ranks, `nstates` arrays per tensor.
class ImageLayout {
 public:
  ImageLayout(std::vector<size_t> numels, int ranks, int nstates);
  int ranks() const { return ranks_; }
  size_t elements(int q) const;                  // of rank q's image
  size_t offset(int q, size_t t, int k) const;   // of tensor t's state k in rank q's image
  const std::vector<size_t>& numels() const { return numels_; }

 private:
  size_t before(int q, size_t t) const;  // elements of tensors [0, t) in rank q's image
  std::vector<size_t> numels_;
  int ranks_, nstates_;
};

// Where images are read from: elements [lo, hi) of state k of tensor t, gathered from the
// slices of every rank that holds some of them.
class StateSource {
 public:
  explicit StateSource(ImageLayout layout) : layout_(std::move(layout)) {}
  virtual ~StateSource() = default;
  void read(size_t t, int k, size_t lo, size_t hi, float* dst);
  const ImageLayout& layout() const { return layout_; }

 protected:
  // `count` elements of rank q's image from element `at`.
  virtual void fetch(int q, size_t at, size_t count, float* dst) = 0;

 private:
  ImageLayout layout_;
};

// Images held in memory, one per rank.
class MemoryStateSource final : public StateSource {
 public:
  MemoryStateSource(ImageLayout layout, std::vector<std::vector<float>> images)
      : StateSource(std::move(layout)), images_(std::move(images)) {}

 private:
  void fetch(int q, size_t at, size_t count, float* dst) override;
  std::vector<std::vector<float>> images_;
};

}  // namespace hoop::dp
