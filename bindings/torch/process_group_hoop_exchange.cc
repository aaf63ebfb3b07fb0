// The hoop process group's data movement with a list of tensors per rank or uneven blocks:
// all_gather_coalesced, gather, scatter, all_to_all and all_to_all_single (with and without
// split sizes), and all_reduce of sparse tensors (all-gathered, summed locally). They move
// bytes, so every dtype goes; a list travels packed in one buffer.
#include <string>
#include <vector>

#include "process_group_hoop.h"
#include "tensor_args.h"

namespace hoop_torch {

namespace {

// The bytes of `tensors`, packed one after the other.
at::Tensor pack(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> parts;
  parts.reserve(tensors.size());
  for (const auto& t : tensors) parts.push_back(as_bytes(dense(t)));
  return parts.empty() ? at::empty({0}, at::kByte) : at::cat(parts);
}

// The inverse of pack: copies the bytes from `offset` on into `tensors`.
void unpack(const at::Tensor& packed, int64_t offset, const std::vector<at::Tensor>& tensors) {
  for (const auto& t : tensors) {
    const auto n = static_cast<int64_t>(byte_size(t));
    copy_from_bytes(t, packed.narrow(0, offset, n));
    offset += n;
  }
}

std::vector<size_t> byte_sizes(const std::vector<at::Tensor>& tensors) {
  std::vector<size_t> sizes;
  sizes.reserve(tensors.size());
  for (const auto& t : tensors) sizes.push_back(byte_size(t));
  return sizes;
}

size_t total(const std::vector<size_t>& sizes) {
  size_t sum = 0;
  for (size_t s : sizes) sum += s;
  return sum;
}

void check_list(const std::vector<at::Tensor>& tensors, size_t n, int rank, const char* op,
                const std::string& what) {
  if (tensors.size() != n) {
    refuse(rank, op, "expects " + std::to_string(n) + " " + what + " tensors, got " +
                         std::to_string(tensors.size()));
  }
  for (const auto& t : tensors) check_tensor(t, rank, op);
}

// `t` is like `like`: same dtype, same number of elements.
void check_like(const at::Tensor& t, const at::Tensor& like, int rank, const char* op) {
  check_same_type(t, like, rank, op);
  if (t.numel() != like.numel()) {
    refuse(rank, op, "a tensor of the list has " + std::to_string(t.numel()) +
                         " elements, this rank's tensor " + std::to_string(like.numel()));
  }
}

// The root's list of gather (scatter) holds one tensor like `like` per rank; the other ranks
// give none.
void check_root_list(const std::vector<std::vector<at::Tensor>>& lists, bool is_root,
                     const at::Tensor& like, int size, int rank, const char* op, const std::string& what) {
  if (!is_root) {
    if (!lists.empty()) refuse(rank, op, what + " tensors are given on a rank other than the root");
    return;
  }
  if (lists.size() != 1) refuse(rank, op, "expects one list of " + what + " tensors on the root");
  check_list(lists[0], static_cast<size_t>(size), rank, op, what);
  for (const auto& t : lists[0]) check_like(t, like, rank, op);
}

// The bytes `t` sends to (or receives from) each of `size` ranks: split_sizes[j] rows of
// dimension 0 for rank j, or equal shares when split_sizes is empty.
std::vector<size_t> split_bytes(const std::vector<int64_t>& split_sizes, const at::Tensor& t,
                                int size, int rank, const char* op) {
  const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
  const size_t row_bytes = rows == 0 ? 0 : byte_size(t) / static_cast<size_t>(rows);
  if (split_sizes.empty()) {
    if (rows % size != 0) {
      refuse(rank, op, "dimension 0 of size " + std::to_string(rows) +
                           " does not divide equally across " + std::to_string(size) + " ranks");
    }
    return std::vector<size_t>(static_cast<size_t>(size), static_cast<size_t>(rows / size) * row_bytes);
  }
  if (split_sizes.size() != static_cast<size_t>(size)) {
    refuse(rank, op, std::to_string(split_sizes.size()) + " split sizes for " +
                         std::to_string(size) + " ranks");
  }
  std::vector<size_t> bytes;
  int64_t sum = 0;
  for (int64_t s : split_sizes) {
    if (s < 0) refuse(rank, op, "split size " + std::to_string(s) + " is negative");
    sum += s;
    bytes.push_back(static_cast<size_t>(s) * row_bytes);
  }
  if (sum != rows) {
    refuse(rank, op, "split sizes add up to " + std::to_string(sum) + ", dimension 0 is " +
                         std::to_string(rows));
  }
  return bytes;
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupHoop::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& output_lists, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  const char* op = "allgather_coalesced";
  if (inputs.empty()) refuse(rank_, op, "expects at least one input tensor");
  for (const auto& t : inputs) check_tensor(t, rank_, op);
  if (output_lists.size() != static_cast<size_t>(size_)) {
    refuse(rank_, op, "expects " + std::to_string(size_) + " output lists, got " +
                          std::to_string(output_lists.size()));
  }
  std::vector<at::Tensor> outputs;
  for (const auto& list : output_lists) {
    check_list(list, inputs.size(), rank_, op, "output");
    for (size_t i = 0; i < list.size(); ++i) check_like(list[i], inputs[i], rank_, op);
    outputs.insert(outputs.end(), list.begin(), list.end());
  }
  at::Tensor send = pack(inputs);
  at::Tensor recv = at::empty({size_ * send.numel()}, send.options());
  auto copy_out = [lists = output_lists, recv, block = send.numel()] {
    for (size_t r = 0; r < lists.size(); ++r) unpack(recv, static_cast<int64_t>(r) * block, lists[r]);
  };
  auto work = c10::make_intrusive<HoopWork>(rank_, c10d::OpType::ALLGATHER_COALESCED,
                                            "hoop:all_gather_coalesced", outputs,
                                            std::vector<at::Tensor>{send, recv}, copy_out);
  work->attach(comm_->allgather_async(send.data_ptr(), recv.data_ptr(), byte_size(send),
                                      hoop::DataType::u8, op_options(opts.timeout)));
  return track(std::move(work));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHoop::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                        std::vector<at::Tensor>& inputs,
                                                        const c10d::GatherOptions& opts) {
  const char* op = "gather";
  const at::Tensor& in = single_tensor(inputs, rank_, op);
  const int root = static_cast<int>(opts.rootRank);
  const bool is_root = rank_ == root;
  check_root_list(outputs, is_root, in, size_, rank_, op, "output");
  at::Tensor src = dense(in);
  at::Tensor flat = at::empty({is_root ? size_ * static_cast<int64_t>(byte_size(src)) : 0},
                              src.options().dtype(at::kByte));
  std::vector<at::Tensor> outs = is_root ? outputs[0] : std::vector<at::Tensor>{};
  auto work = c10::make_intrusive<HoopWork>(
      rank_, c10d::OpType::GATHER, "hoop:gather", outs, std::vector<at::Tensor>{src, flat},
      is_root ? std::function<void()>([outs, flat] { unpack(flat, 0, outs); }) : nullptr);
  work->attach(comm_->gather_async(src.data_ptr(), is_root ? flat.data_ptr() : nullptr,
                                   byte_size(src), hoop::DataType::u8, root,
                                   op_options(opts.timeout)));
  return track(std::move(work));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHoop::scatter(std::vector<at::Tensor>& outputs,
                                                         std::vector<std::vector<at::Tensor>>& inputs,
                                                         const c10d::ScatterOptions& opts) {
  const char* op = "scatter";
  const at::Tensor& out = single_tensor(outputs, rank_, op);
  const int root = static_cast<int>(opts.rootRank);
  const bool is_root = rank_ == root;
  check_root_list(inputs, is_root, out, size_, rank_, op, "input");
  at::Tensor flat = is_root ? pack(inputs[0]) : at::empty({0}, out.options().dtype(at::kByte));
  at::Tensor dst = dense(out);
  auto work = c10::make_intrusive<HoopWork>(rank_, c10d::OpType::SCATTER, "hoop:scatter", outputs,
                                            std::vector<at::Tensor>{flat, dst},
                                            copy_back_if_staged(out, dst));
  work->attach(comm_->scatter_async(is_root ? flat.data_ptr() : nullptr, dst.data_ptr(),
                                    byte_size(dst), hoop::DataType::u8, root,
                                    op_options(opts.timeout)));
  return track(std::move(work));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHoop::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                               std::vector<int64_t>& output_split_sizes,
                                                               std::vector<int64_t>& input_split_sizes,
                                                               const c10d::AllToAllOptions& opts) {
  const char* op = "alltoall_base";
  check_tensor(output, rank_, op);
  check_tensor(input, rank_, op);
  check_same_type(output, input, rank_, op);
  const std::vector<size_t> send_counts = split_bytes(input_split_sizes, input, size_, rank_, op);
  const std::vector<size_t> recv_counts = split_bytes(output_split_sizes, output, size_, rank_, op);
  const bool equal = input_split_sizes.empty() && output_split_sizes.empty();
  if (equal && byte_size(output) != byte_size(input)) {
    refuse(rank_, op, "without split sizes the output has the input's size; they have " +
                          std::to_string(output.numel()) + " and " + std::to_string(input.numel()) +
                          " elements");
  }
  at::Tensor dst = dense(output);
  at::Tensor src = dense(input);
  if (overlaps(src, dst)) src = src.clone();
  auto work = c10::make_intrusive<HoopWork>(rank_, c10d::OpType::ALLTOALL_BASE, "hoop:all_to_all",
                                            std::vector<at::Tensor>{output},
                                            std::vector<at::Tensor>{src, dst},
                                            copy_back_if_staged(output, dst));
  if (equal) {
    work->attach(comm_->alltoall_async(src.data_ptr(), dst.data_ptr(), send_counts[0],
                                       hoop::DataType::u8, op_options(opts.timeout)));
  } else {
    work->attach(comm_->alltoallv_async(src.data_ptr(), send_counts, {}, dst.data_ptr(), recv_counts,
                                        {}, hoop::DataType::u8, op_options(opts.timeout)));
  }
  return track(std::move(work));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHoop::alltoall(std::vector<at::Tensor>& outputs,
                                                          std::vector<at::Tensor>& inputs,
                                                          const c10d::AllToAllOptions& opts) {
  const char* op = "alltoall";
  check_list(outputs, static_cast<size_t>(size_), rank_, op, "output");
  check_list(inputs, static_cast<size_t>(size_), rank_, op, "input");
  const std::vector<size_t> send_counts = byte_sizes(inputs);
  const std::vector<size_t> recv_counts = byte_sizes(outputs);
  at::Tensor send = pack(inputs);
  at::Tensor recv = at::empty({static_cast<int64_t>(total(recv_counts))}, send.options());
  auto work = c10::make_intrusive<HoopWork>(rank_, c10d::OpType::ALLTOALL, "hoop:all_to_all", outputs,
                                            std::vector<at::Tensor>{send, recv},
                                            [outputs, recv] { unpack(recv, 0, outputs); });
  work->attach(comm_->alltoallv_async(send.data_ptr(), send_counts, {}, recv.data_ptr(), recv_counts,
                                      {}, hoop::DataType::u8, op_options(opts.timeout)));
  return track(std::move(work));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHoop::sparse_allreduce(at::Tensor& tensor,
                                                                  const c10d::AllreduceOptions& opts) {
  // As gloo: every rank's indices and values are all-gathered and summed here in rank order,
  // so every rank gets the same coalesced tensor.
  const char* op = "allreduce";
  if (!tensor.device().is_cpu()) refuse(rank_, op, "the hoop backend moves CPU tensors only");
  if (opts.reduceOp != c10d::ReduceOp::SUM) refuse(rank_, op, "sparse tensors are reduced with SUM only");
  const at::Tensor in = tensor.coalesce();
  const at::Tensor indices = in._indices().contiguous();  // sparse_dim x nnz
  const at::Tensor values = in._values().contiguous();    // nnz x dense sizes
  // The second operation's sizes depend on every rank's nnz: this first one is waited for.
  std::vector<int64_t> nnz(static_cast<size_t>(size_));
  const int64_t my_nnz = in._nnz();
  comm_->allgather(&my_nnz, nnz.data(), 1, hoop::DataType::i64, op_options(opts.timeout));
  const size_t index_bytes = static_cast<size_t>(indices.size(0)) * sizeof(int64_t);
  const size_t value_bytes =
      static_cast<size_t>(c10::multiply_integers(values.sizes().slice(1))) * values.element_size();
  std::vector<size_t> counts;
  for (int64_t n : nnz) counts.push_back(static_cast<size_t>(n) * (index_bytes + value_bytes));
  at::Tensor send = pack({indices, values});
  at::Tensor recv = at::empty({static_cast<int64_t>(total(counts))}, send.options());
  auto sum_up = [tensor, in, nnz, recv] {
    at::Tensor sum = at::zeros_like(in);
    int64_t offset = 0;
    for (int64_t n : nnz) {
      at::Tensor idx = at::empty({in.sparse_dim(), n}, in._indices().options());
      std::vector<int64_t> value_sizes = in._values().sizes().vec();
      value_sizes[0] = n;
      at::Tensor val = at::empty(value_sizes, in._values().options());
      unpack(recv, offset, {idx, val});
      offset += static_cast<int64_t>(byte_size(idx) + byte_size(val));
      sum = sum + at::sparse_coo_tensor(idx, val, in.sizes());
    }
    tensor.copy_(sum.coalesce());
  };
  auto work = c10::make_intrusive<HoopWork>(rank_, c10d::OpType::ALLREDUCE, "hoop:all_reduce",
                                            std::vector<at::Tensor>{tensor},
                                            std::vector<at::Tensor>{send, recv}, sum_up);
  work->attach(comm_->allgatherv_async(send.data_ptr(), recv.data_ptr(), counts, {},
                                       hoop::DataType::u8, op_options(opts.timeout)));
  return track(std::move(work));
}

}  // namespace hoop_torch
