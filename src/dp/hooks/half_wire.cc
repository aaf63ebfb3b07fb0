// bf16 / fp16 on the wire. AllReduce of 16-bit data with f32 sums, in half the bytes of an f32
// AllReduce: every rank sends chunk q of its bucket (narrowed to 16 bits) to rank q (an
// AllToAll), rank q widens the N chunks, sums them in rank order in f32, divides by N,
// rounds once to 16 bits, and an AllGather brings every chunk to every rank: 2 (N-1)/N x 2
// bytes per element against 2 (N-1)/N x 4 for the ring AllReduce of f32. (hoop's own bf16
// AllReduce also sums in f32, but its ReduceScatter phase moves f32.) At stages 1 and 2 the
// AllToAll and the sum are the ReduceScatter. Every rank gets the same bits: the gathered
// chunks.
#include <cstring>

#include "dp/hooks/hooks.h"
#include "kernels/reduce.h"

namespace hoop::dp::hooks {

namespace {

class HalfWireHook final : public CommHook {
 public:
  explicit HalfWireHook(DataType wire) : wire_(wire) {}
  std::string name() const override { return wire_ == DataType::bf16 ? "bf16" : "fp16"; }
  bool supports_stage(int stage) const override { return stage <= 2; }
  void setup(const CommHookContext&, const std::vector<GradBucket>&) override {}

  void allreduce(const CommHookContext& ctx, GradBucket& b) override {
    const size_t n = static_cast<size_t>(ctx.size);
    const size_t c = (b.numel + n - 1) / n;
    narrow(b.data, b.dtype, b.numel, c * n);
    reduce_mine(ctx, c);
    gathered_.resize(c * n * 2);
    if (ctx.comm) {
      ctx.comm->allgather(mine_.data(), gathered_.data(), c, wire_, ctx.op_options);
    } else {
      std::memcpy(gathered_.data(), mine_.data(), c * 2);
    }
    widen(gathered_.data(), b.data, b.dtype, b.numel);
  }

  void reducescatter(const CommHookContext& ctx, ShardedGradBucket& b) override {
    const size_t n = static_cast<size_t>(ctx.size);
    narrow(b.segments, b.dtype, b.seg * n, b.seg * n);
    reduce_mine(ctx, b.seg);
    widen(mine_.data(), b.shard, b.dtype, b.seg);
  }

 private:
  // send_ = the first n elements of src in the wire type, zeros up to `padded`.
  void narrow(const void* src, DataType dt, size_t n, size_t padded) {
    f32_.resize(padded);
    load_f32(f32_.data(), src, dt, n);
    std::fill(f32_.begin() + static_cast<std::ptrdiff_t>(n), f32_.end(), 0.0f);
    send_.resize(padded * 2);
    kernels::from_f32(send_.data(), wire_, f32_.data(), padded);
  }
  // Chunks of c elements of send_ to their ranks; mine_ = the rounded average of this rank's.
  void reduce_mine(const CommHookContext& ctx, size_t c) {
    const size_t n = static_cast<size_t>(ctx.size);
    recv_.resize(c * 2 * n);
    if (ctx.comm) {
      ctx.comm->alltoall(send_.data(), recv_.data(), c, wire_, ctx.op_options);
    } else {
      std::memcpy(recv_.data(), send_.data(), c * 2);
    }
    sum_.resize(c);
    f32_.resize(c);
    for (size_t q = 0; q < n; ++q) {
      float* dst = q == 0 ? sum_.data() : f32_.data();
      kernels::to_f32(dst, recv_.data() + q * c * 2, wire_, c);
      if (q > 0) {
        for (size_t i = 0; i < c; ++i) sum_[i] += f32_[i];
      }
    }
    const float div = static_cast<float>(n);
    for (float& v : sum_) v /= div;
    mine_.resize(c * 2);
    kernels::from_f32(mine_.data(), wire_, sum_.data(), c);
  }
  void widen(const std::byte* wire, void* dst, DataType dt, size_t n) {
    f32_.resize(n);
    kernels::to_f32(f32_.data(), wire, wire_, n);
    store_f32(dst, dt, f32_.data(), n);
  }

  DataType wire_;
  std::vector<float> f32_, sum_;
  std::vector<std::byte> send_, recv_, mine_, gathered_;
};

}  // namespace

std::shared_ptr<CommHook> make_half_wire(DataType wire) {
  return std::make_shared<HalfWireHook>(wire);
}

}  // namespace hoop::dp::hooks
