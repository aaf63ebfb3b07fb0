#include "hoop/types.h"

#include <algorithm>
#include <cctype>
#include <string>

namespace hoop {

size_t dtype_size(DataType dt) noexcept {
  switch (dt) {
    case DataType::f64: case DataType::i64: case DataType::u64: return 8;
    case DataType::f32: case DataType::i32: case DataType::u32: return 4;
    case DataType::f16: case DataType::bf16: return 2;
    case DataType::i8: case DataType::u8: return 1;
  }
  return 0;
}

bool is_valid(DataType dt) noexcept { return dtype_size(dt) != 0; }
bool is_valid(RedOp op) noexcept { return static_cast<unsigned>(op) <= static_cast<unsigned>(RedOp::avg); }

bool is_float(DataType dt) noexcept {
  return dt == DataType::f32 || dt == DataType::f64 || dt == DataType::f16 || dt == DataType::bf16;
}

std::string_view to_string(DataType dt) noexcept {
  switch (dt) {
    case DataType::f32: return "f32";
    case DataType::f64: return "f64";
    case DataType::f16: return "f16";
    case DataType::bf16: return "bf16";
    case DataType::i8: return "i8";
    case DataType::u8: return "u8";
    case DataType::i32: return "i32";
    case DataType::u32: return "u32";
    case DataType::i64: return "i64";
    case DataType::u64: return "u64";
  }
  return "invalid-dtype";
}

std::string_view to_string(RedOp op) noexcept {
  switch (op) {
    case RedOp::sum: return "sum";
    case RedOp::prod: return "prod";
    case RedOp::min: return "min";
    case RedOp::max: return "max";
    case RedOp::avg: return "avg";
  }
  return "invalid-op";
}

std::string_view to_string(OpType op) noexcept {
  switch (op) {
    case OpType::allreduce: return "allreduce";
    case OpType::reducescatter: return "reducescatter";
    case OpType::allgather: return "allgather";
    case OpType::broadcast: return "broadcast";
    case OpType::reduce: return "reduce";
    case OpType::barrier: return "barrier";
    case OpType::send: return "send";
    case OpType::recv: return "recv";
    case OpType::alltoall: return "alltoall";
    case OpType::alltoallv: return "alltoallv";
    case OpType::gather: return "gather";
    case OpType::gatherv: return "gatherv";
    case OpType::scatter: return "scatter";
    case OpType::scatterv: return "scatterv";
    case OpType::allgatherv: return "allgatherv";
    case OpType::reducescatterv: return "reducescatterv";
  }
  return "invalid-optype";
}

namespace {
std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}
}  // namespace

std::optional<DataType> parse_dtype(std::string_view name) noexcept {
  struct Alias { const char* name; DataType dt; };
  static constexpr Alias kAliases[] = {
      {"f32", DataType::f32},   {"float", DataType::f32},   {"float32", DataType::f32},
      {"f64", DataType::f64},   {"double", DataType::f64},  {"float64", DataType::f64},
      {"f16", DataType::f16},   {"half", DataType::f16},    {"float16", DataType::f16},
      {"bf16", DataType::bf16}, {"bfloat16", DataType::bf16},
      {"i8", DataType::i8},     {"int8", DataType::i8},     {"char", DataType::i8},
      {"u8", DataType::u8},     {"uint8", DataType::u8},
      {"i32", DataType::i32},   {"int32", DataType::i32},   {"int", DataType::i32},
      {"u32", DataType::u32},   {"uint32", DataType::u32},
      {"i64", DataType::i64},   {"int64", DataType::i64},   {"long", DataType::i64},
      {"u64", DataType::u64},   {"uint64", DataType::u64},
  };
  const std::string key = lower(name);
  for (const auto& a : kAliases) {
    if (key == a.name) return a.dt;
  }
  return std::nullopt;
}

std::optional<RedOp> parse_redop(std::string_view name) noexcept {
  const std::string key = lower(name);
  for (RedOp op : kAllRedOps) {
    if (key == to_string(op)) return op;
  }
  if (key == "mean") return RedOp::avg;
  if (key == "product") return RedOp::prod;
  return std::nullopt;
}

std::optional<OpType> parse_optype(std::string_view name) noexcept {
  const std::string key = lower(name);
  for (int i = 0; i <= static_cast<int>(OpType::reducescatterv); ++i) {
    auto op = static_cast<OpType>(i);
    if (key == to_string(op)) return op;
  }
  if (key == "all_reduce") return OpType::allreduce;
  if (key == "reduce_scatter") return OpType::reducescatter;
  if (key == "all_gather") return OpType::allgather;
  return std::nullopt;
}

}  // namespace hoop
