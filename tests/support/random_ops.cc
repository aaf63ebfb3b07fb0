#include "support/random_ops.h"

#include <fmt/format.h>

#include <cstring>

#include "kernels/half_bits.h"
#include "support/reference.h"

namespace hoop::test {

namespace {

bool is_unsigned(DataType dt) {
  return dt == DataType::u8 || dt == DataType::u32 || dt == DataType::u64;
}
bool is_reducing(OpType op) {
  return op == OpType::allreduce || op == OpType::reducescatter || op == OpType::reduce;
}

// Input element `index` of `rank`, a small integer chosen so that the reduction stays exact.
int64_t input_value(const RandomOp& op, uint64_t tag, int rank, size_t index) {
  const uint64_t h = ref::mix64(tag * 0x9E3779B97F4A7C15ull ^ (uint64_t(rank) << 40) ^ index);
  if (!is_reducing(op.op)) return static_cast<int64_t>(h % 200) - (is_unsigned(op.dtype) ? 0 : 100);
  switch (op.redop) {
    case RedOp::sum:
      return is_unsigned(op.dtype) ? int64_t(h % 33) : int64_t(h % 33) - 16;
    case RedOp::avg:
      // The sum over up to 8 ranks must fit i8: the library sums in the dtype (wrapping),
      // then divides, and a wrapped sum divides differently.
      return int64_t(h % 16);
    case RedOp::prod: {
      static constexpr int64_t kSigned[] = {-2, -1, 1, 2};
      static constexpr int64_t kUnsigned[] = {1, 2, 3, 1};
      return (is_unsigned(op.dtype) ? kUnsigned : kSigned)[h % 4];
    }
    case RedOp::min:
    case RedOp::max:
      return is_unsigned(op.dtype) ? int64_t(h % 201) : int64_t(h % 201) - 100;
  }
  return 0;
}

// The bits of `value` (an integer, or for avg an integer divided by nranks) in dtype dt.
// Integers wrap like the library's arithmetic (two's complement, modulo 2^bits).
uint64_t bits_of(double value, int64_t integer, DataType dt) {
  switch (dt) {
    case DataType::f32: return __builtin_bit_cast(uint32_t, static_cast<float>(value));
    case DataType::f64: return __builtin_bit_cast(uint64_t, value);
    case DataType::f16: return kernels::float_to_f16_bits(static_cast<float>(value));
    case DataType::bf16: return kernels::float_to_bf16_bits(static_cast<float>(value));
    case DataType::i8:
    case DataType::u8: return static_cast<uint8_t>(static_cast<uint64_t>(integer));
    case DataType::i32:
    case DataType::u32: return static_cast<uint32_t>(static_cast<uint64_t>(integer));
    case DataType::i64:
    case DataType::u64: return static_cast<uint64_t>(integer);
  }
  return 0;
}

uint64_t input_bits(const RandomOp& op, uint64_t tag, int rank, size_t index) {
  const int64_t v = input_value(op, tag, rank, index);
  return bits_of(static_cast<double>(v), v, op.dtype);
}

// `v` reduced modulo 2^bits of an integer dtype, read back as that dtype's value.
int64_t wrap_to(int64_t v, DataType dt) {
  switch (dt) {
    case DataType::i8: return static_cast<int8_t>(v);
    case DataType::u8: return static_cast<uint8_t>(v);
    case DataType::i32: return static_cast<int32_t>(v);
    case DataType::u32: return static_cast<uint32_t>(v);
    default: return v;
  }
}

// The reduction over every rank of input element `index`.
uint64_t reduced_bits(const RandomOp& op, uint64_t tag, int nranks, size_t index) {
  int64_t acc = input_value(op, tag, 0, index);
  for (int r = 1; r < nranks; ++r) {
    const int64_t v = input_value(op, tag, r, index);
    switch (op.redop) {
      case RedOp::sum:
      case RedOp::avg: acc += v; break;
      case RedOp::prod: acc = static_cast<int64_t>(static_cast<uint64_t>(acc) * static_cast<uint64_t>(v)); break;
      case RedOp::min: acc = std::min(acc, v); break;
      case RedOp::max: acc = std::max(acc, v); break;
    }
  }
  if (op.redop == RedOp::avg) {
    // Floats divide exactly (a power of two). Integers: the sum wraps in the dtype first (as
    // the library's sums do; 4 x 32 overflows i8), then divides, truncating toward zero.
    if (is_float(op.dtype)) return bits_of(static_cast<double>(acc) / nranks, 0, op.dtype);
    acc = wrap_to(acc, op.dtype) / nranks;
  }
  return bits_of(static_cast<double>(acc), acc, op.dtype);
}

void store_bits(uint8_t* dst, size_t index, size_t esize, uint64_t bits) {
  std::memcpy(dst + index * esize, &bits, esize);  // little-endian: the low bytes
}

uint64_t load_bits(const uint8_t* src, size_t index, size_t esize) {
  uint64_t bits = 0;
  std::memcpy(&bits, src + index * esize, esize);
  return bits;
}

}  // namespace

std::string RandomOp::describe() const {
  std::string s = fmt::format("{}(count {}, {}", to_string(op), count, to_string(dtype));
  if (is_reducing(op)) s += fmt::format(", {}", to_string(redop));
  if (op == OpType::broadcast || op == OpType::reduce) s += fmt::format(", root {}", root);
  if (in_place) s += ", in place";
  return s + ")";
}

RandomOp draw_op(std::mt19937_64& rng, int nranks, size_t max_count) {
  static constexpr OpType kOps[] = {OpType::allreduce, OpType::allreduce, OpType::reducescatter,
                                    OpType::allgather, OpType::broadcast, OpType::reduce,
                                    OpType::barrier,   OpType::alltoall};
  RandomOp op;
  op.op = kOps[rng() % std::size(kOps)];
  op.dtype = kAllDataTypes[rng() % kAllDataTypes.size()];
  op.redop = kAllRedOps[rng() % kAllRedOps.size()];
  // Half the sizes below 1 Ki elements (latency paths), the rest up to max_count.
  const size_t small = std::min<size_t>(max_count, 1024);
  op.count = (rng() % 2 == 0) ? rng() % (small + 1) : rng() % (max_count + 1);
  if (op.op == OpType::barrier) op.count = 0;
  op.root = static_cast<int>(rng() % static_cast<uint64_t>(nranks));
  op.in_place = rng() % 2 == 0;
  return op;
}

OpBuffers::OpBuffers(const RandomOp& op, uint64_t tag, int rank, int nranks)
    : op_(op), tag_(tag), rank_(rank), nranks_(nranks) {
  const size_t es = dtype_size(op.dtype);
  const size_t n = op.count;
  const auto rows = static_cast<size_t>(nranks);
  size_t send_elems = n, recv_elems = n;
  if (op.op == OpType::reducescatter) send_elems = n * rows;
  if (op.op == OpType::allgather) recv_elems = n * rows;
  if (op.op == OpType::alltoall) send_elems = recv_elems = n * rows;
  if (op.op == OpType::barrier) send_elems = recv_elems = 0;
  // In place, send lives inside recv (or is recv): one buffer, the bigger of the two.
  if (op.in_place) {
    recv_.assign(std::max(send_elems, recv_elems) * es + 1, 0xA5);
  } else {
    send_.assign(send_elems * es + 1, 0);
    recv_.assign(recv_elems * es + 1, 0xA5);
  }
  auto* in = op.in_place ? recv_.data() : send_.data();
  // In place allgather reads this rank's input from its slot of recv.
  const size_t base = (op.in_place && op.op == OpType::allgather) ? static_cast<size_t>(rank) * n : 0;
  for (size_t i = 0; i < send_elems; ++i) store_bits(in, base + i, es, input_bits(op, tag, rank, i));
}

const void* OpBuffers::send_ptr() const {
  if (!op_.in_place) return send_.data();
  const size_t es = dtype_size(op_.dtype);
  if (op_.op == OpType::allgather) return recv_.data() + static_cast<size_t>(rank_) * op_.count * es;
  return recv_.data();
}

void* OpBuffers::recv_ptr() {
  if (op_.in_place && op_.op == OpType::reducescatter) {
    return recv_.data() + static_cast<size_t>(rank_) * op_.count * dtype_size(op_.dtype);
  }
  return recv_.data();
}

void OpBuffers::run(Communicator& c) { start(c).wait(); }

Work OpBuffers::start(Communicator& c) {
  const void* s = send_ptr();
  void* r = recv_ptr();
  switch (op_.op) {
    case OpType::allreduce: return c.allreduce_async(s, r, op_.count, op_.dtype, op_.redop);
    case OpType::reducescatter: return c.reducescatter_async(s, r, op_.count, op_.dtype, op_.redop);
    case OpType::allgather: return c.allgather_async(s, r, op_.count, op_.dtype);
    case OpType::broadcast: return c.broadcast_async(s, r, op_.count, op_.dtype, op_.root);
    case OpType::reduce: return c.reduce_async(s, r, op_.count, op_.dtype, op_.redop, op_.root);
    case OpType::alltoall: return c.alltoall_async(s, r, op_.count, op_.dtype);
    default: return c.barrier_async();
  }
}

std::string OpBuffers::verify() const {
  const size_t es = dtype_size(op_.dtype);
  const size_t n = op_.count;
  const uint8_t* out = recv_.data();
  size_t wrong = 0, first = 0;
  uint64_t first_got = 0, first_want = 0;
  auto expect = [&](size_t at, uint64_t want) {
    const uint64_t got = load_bits(out, at, es);
    if (got != want && wrong++ == 0) {
      first = at;
      first_got = got;
      first_want = want;
    }
  };
  switch (op_.op) {
    case OpType::allreduce:
      for (size_t i = 0; i < n; ++i) expect(i, reduced_bits(op_, tag_, nranks_, i));
      break;
    case OpType::reducescatter: {
      const size_t off = op_.in_place ? static_cast<size_t>(rank_) * n : 0;
      for (size_t j = 0; j < n; ++j) {
        expect(off + j, reduced_bits(op_, tag_, nranks_, static_cast<size_t>(rank_) * n + j));
      }
      break;
    }
    case OpType::allgather:
      for (int r = 0; r < nranks_; ++r) {
        for (size_t j = 0; j < n; ++j) expect(static_cast<size_t>(r) * n + j, input_bits(op_, tag_, r, j));
      }
      break;
    case OpType::broadcast:
      for (size_t i = 0; i < n; ++i) expect(i, input_bits(op_, tag_, op_.root, i));
      break;
    case OpType::alltoall:
      for (int r = 0; r < nranks_; ++r) {
        for (size_t j = 0; j < n; ++j)
          expect(static_cast<size_t>(r) * n + j, input_bits(op_, tag_, r, static_cast<size_t>(rank_) * n + j));
      }
      break;
    case OpType::reduce:
      if (rank_ == op_.root) {
        for (size_t i = 0; i < n; ++i) expect(i, reduced_bits(op_, tag_, nranks_, i));
      }
      break;
    default:
      break;
  }
  // The byte past the end is nobody's to write.
  if (recv_.back() != 0xA5) return fmt::format("{}: wrote past the end of recv", op_.describe());
  if (wrong == 0) return {};
  return fmt::format("{} on rank {}: {} wrong elements, first at {}: bits {:#x}, want {:#x}",
                     op_.describe(), rank_, wrong, first, first_got, first_want);
}

}  // namespace hoop::test
