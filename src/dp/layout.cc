#include "dp/layout.h"

namespace hoop::dp {

void Layout::build(int nranks, size_t grad_elem_bytes, size_t first_cap, size_t cap) {
  ranks = nranks;
  numel = 0;
  int nlayers = 0;
  for (const TensorSlot& t : tensors) {
    numel += t.numel;
    nlayers = std::max(nlayers, t.layer + 1);
  }
  layers.assign(static_cast<size_t>(nlayers), Group{});
  layer_offset.assign(static_cast<size_t>(nlayers), 0);
  size_t flat = 0;
  for (TensorSlot& t : tensors) {
    t.slice = (t.numel + static_cast<size_t>(nranks) - 1) / static_cast<size_t>(nranks);
    Group& l = layers[static_cast<size_t>(t.layer)];
    if (l.numel == 0) layer_offset[static_cast<size_t>(t.layer)] = flat;
    t.layer_offset = l.numel;
    l.numel += t.numel;
    flat += t.numel;
  }

  // Buckets and shard offsets, walking the tensors backwards.
  buckets.clear();
  shard = 0;
  size_t grad_flat = 0;
  for (int i = static_cast<int>(tensors.size()) - 1; i >= 0; --i) {
    TensorSlot& t = tensors[static_cast<size_t>(i)];
    if (buckets.empty()) buckets.push_back(Group{{}, 0, 0, shard, grad_flat});
    Group* b = &buckets.back();
    const size_t limit = buckets.size() == 1 ? first_cap : cap;
    if (!b->tensors.empty() && b->numel * grad_elem_bytes >= limit) {
      buckets.push_back(Group{{}, 0, 0, shard, grad_flat});
      b = &buckets.back();
    }
    t.bucket = static_cast<int>(buckets.size()) - 1;
    t.bucket_offset = b->numel;
    t.shard_offset = shard;
    b->tensors.push_back(i);
    b->numel += t.numel;
    b->seg += t.slice;
    shard += t.slice;
    grad_flat += t.numel;
  }
  // Layers: their tensors in shard order (reverse registration) are contiguous in the shard.
  for (Group& l : layers) {
    l.tensors.clear();
    l.seg = 0;
  }
  for (int i = static_cast<int>(tensors.size()) - 1; i >= 0; --i) {
    const TensorSlot& t = tensors[static_cast<size_t>(i)];
    Group& l = layers[static_cast<size_t>(t.layer)];
    if (l.tensors.empty()) l.shard_offset = t.shard_offset;
    l.tensors.push_back(i);
    l.seg += t.slice;
  }
}

}  // namespace hoop::dp
