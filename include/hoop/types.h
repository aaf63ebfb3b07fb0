// Element types, reduction operators and collective kinds of the public API.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "hoop/export.h"

namespace hoop {

enum class DataType : uint8_t { f32, f64, f16, bf16, i8, u8, i32, u32, i64, u64 };
enum class RedOp : uint8_t { sum, prod, min, max, avg };

// Every operation a communicator runs; also the opcode carried in message headers.
enum class OpType : uint8_t {
  allreduce,
  reducescatter,
  allgather,
  broadcast,
  reduce,
  barrier,
  send,
  recv,
  // The rest of the collective set (appended: the values are carried in message headers).
  alltoall,
  alltoallv,
  gather,
  gatherv,
  scatter,
  scatterv,
  allgatherv,
  reducescatterv,
};

inline constexpr std::array kAllDataTypes = {
    DataType::f32, DataType::f64, DataType::f16, DataType::bf16, DataType::i8,
    DataType::u8,  DataType::i32, DataType::u32, DataType::i64,  DataType::u64};
inline constexpr std::array kAllRedOps = {RedOp::sum, RedOp::prod, RedOp::min, RedOp::max,
                                          RedOp::avg};

// Size of one element in bytes; 0 for a value outside the enum.
HOOP_API size_t dtype_size(DataType dt) noexcept;
HOOP_API bool is_valid(DataType dt) noexcept;
HOOP_API bool is_valid(RedOp op) noexcept;
HOOP_API bool is_float(DataType dt) noexcept;  // f32, f64, f16, bf16

HOOP_API std::string_view to_string(DataType dt) noexcept;
HOOP_API std::string_view to_string(RedOp op) noexcept;
HOOP_API std::string_view to_string(OpType op) noexcept;

// Accept the canonical names ("f32", "bf16", ...) and the usual aliases
// ("float", "float32", "half", "int32", "int", ...).
HOOP_API std::optional<DataType> parse_dtype(std::string_view name) noexcept;
HOOP_API std::optional<RedOp> parse_redop(std::string_view name) noexcept;
HOOP_API std::optional<OpType> parse_optype(std::string_view name) noexcept;

}  // namespace hoop
