// The checks and staging the hoop process group applies to the tensors of a call: hoop's
// operations take flat, dense buffers of elements (bytes, for data movement).
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "hoop/communicator.h"
#include "hoop/error.h"

namespace hoop_torch {

[[noreturn]] inline void refuse(int rank, const char* op, const std::string& what) {
  throw hoop::Error(hoop::ErrorCode::invalid_argument, what, hoop::ErrorContext{rank, op, 0, -1});
}

inline std::string dtype_name(at::ScalarType st) { return c10::toString(st); }

inline void check_tensor(const at::Tensor& t, int rank, const char* op) {
  if (!t.defined()) refuse(rank, op, "tensor is undefined");
  if (!t.device().is_cpu()) {
    refuse(rank, op, "tensor is on " + t.device().str() + "; the hoop backend moves CPU tensors only");
  }
  if (t.layout() != at::kStrided) refuse(rank, op, "sparse tensors go through all_reduce only");
}

inline const at::Tensor& single_tensor(const std::vector<at::Tensor>& tensors, int rank,
                                       const char* op) {
  if (tensors.size() != 1) {
    refuse(rank, op, "expects exactly one tensor, got " + std::to_string(tensors.size()));
  }
  check_tensor(tensors[0], rank, op);
  return tensors[0];
}

inline void check_same_type(const at::Tensor& a, const at::Tensor& b, int rank, const char* op) {
  if (a.scalar_type() != b.scalar_type()) {
    refuse(rank, op, "tensors mix dtypes " + dtype_name(a.scalar_type()) + " and " +
                         dtype_name(b.scalar_type()));
  }
}

// A dense copy of `t` (or `t` itself when it is already dense), for hoop's flat buffers.
inline at::Tensor dense(const at::Tensor& t) { return t.is_contiguous() ? t : t.contiguous(); }

inline size_t byte_size(const at::Tensor& t) {
  return static_cast<size_t>(t.numel()) * static_cast<size_t>(t.element_size());
}

// The bytes of a dense tensor, as a flat uint8 view of its storage. (A dense tensor may still
// have any stride in a dimension of size 0 or 1, which a view as bytes does not take.)
inline at::Tensor as_bytes(const at::Tensor& dense_tensor) {
  if (dense_tensor.numel() == 0) return at::empty({0}, dense_tensor.options().dtype(at::kByte));
  return dense_tensor.as_strided({dense_tensor.numel()}, {1}).view(at::kByte);
}

// Copies `from` back into `to` after the operation when `from` is a staging copy.
inline std::function<void()> copy_back_if_staged(const at::Tensor& to, const at::Tensor& from) {
  if (to.data_ptr() == from.data_ptr() && to.is_contiguous()) return nullptr;
  return [to, from]() mutable { to.copy_(from); };
}

// Writes `bytes` (byte_size(to) of them) into `to`, dense or not.
inline void copy_from_bytes(const at::Tensor& to, const at::Tensor& bytes) {
  if (to.is_contiguous()) {
    as_bytes(to).copy_(bytes);
    return;
  }
  at::Tensor staged = at::empty_like(to, at::MemoryFormat::Contiguous);
  as_bytes(staged).copy_(bytes);
  to.copy_(staged);
}

inline bool overlaps(const at::Tensor& a, const at::Tensor& b) {
  const auto* pa = static_cast<const char*>(a.data_ptr());
  const auto* pb = static_cast<const char*>(b.data_ptr());
  return pa < pb + byte_size(b) && pb < pa + byte_size(a);
}

inline hoop::OpOptions op_options(std::chrono::milliseconds timeout) {
  hoop::OpOptions o;
  if (timeout != c10d::kUnsetTimeout) o.timeout = timeout;
  return o;
}

}  // namespace hoop_torch
