// Where every tensor lives: its place in its layer's f32 view, its bucket, its rank slices.
//
// Buckets group tensors in reverse registration order: a bucket closes once it holds at least
// its cap (the first bucket's cap, then the general one), as PyTorch's DDP does.
// Shards: tensor t of n elements has slice s = ceil(n/N); rank r owns [r*s, min(n,(r+1)*s)).
// A rank's shard is its slices in bucket order (reverse registration), so a bucket's and a
// layer's slices are contiguous in every shard; a group (bucket or layer) is exchanged as N
// segments of `seg` elements, segment q holding rank q's slices of the group's tensors.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "hoop/dp.h"

namespace hoop::dp {

struct TensorSlot {
  std::string name;
  size_t numel = 0;
  std::vector<size_t> shape;  // as registered; its product is numel
  int layer = 0;
  size_t layer_offset = 0;  // in the layer's f32 view
  size_t slice = 0;         // ceil(numel / N)
  size_t shard_offset = 0;  // of the slice in every rank's shard
  int bucket = -1;
  size_t bucket_offset = 0;  // unpadded offset in its bucket (stage 0 layout)
  // Rank r's valid slice: [begin(r), begin(r) + valid(r)).
  size_t begin(int r) const { return static_cast<size_t>(r) * slice; }
  size_t valid(int r) const {
    const size_t b = begin(r);
    return b >= numel ? 0 : std::min(slice, numel - b);
  }
};

struct Group {  // a bucket or a layer
  std::vector<int> tensors;  // in shard order
  size_t numel = 0;          // unpadded elements
  size_t seg = 0;            // sum of the tensors' slices
  size_t shard_offset = 0;   // of its first slice in the shard
  size_t flat_offset = 0;    // bucket: unpadded offset in the stage-0 gradient buffer
};

struct Layout {
  int ranks = 1;
  std::vector<TensorSlot> tensors;  // registration order
  std::vector<Group> buckets;       // bucket 0 holds the last registered tensors
  std::vector<Group> layers;
  std::vector<size_t> layer_offset;  // of each layer's view in the full parameter buffer
  size_t numel = 0;                  // psi
  size_t shard = 0;                  // sum of slices

  // Fills slices, buckets and shard offsets once all tensors are in `tensors`.
  void build(int nranks, size_t grad_elem_bytes, size_t first_cap, size_t cap);
};

}  // namespace hoop::dp
