#include "engine/frame_check.h"

#include <fmt/format.h>

#include "core/errors.h"
#include "core/op_traits.h"

namespace hoop::engine {

transport::FrameHeader make_header(const OpIdentity& id, uint64_t payload_bytes) {
  transport::FrameHeader h;
  h.op = static_cast<uint8_t>(id.op);
  h.dtype = static_cast<uint8_t>(id.dtype);
  h.redop = static_cast<uint8_t>(id.redop);
  h.flags = id.phase;
  h.src_rank = id.rank;
  h.root = id.root;
  h.seq = id.seq;
  h.count = id.count;
  h.payload_bytes = payload_bytes;
  h.comm_id = id.comm_id;
  return h;
}

namespace {

// "allreduce #5 (count 100, f32, sum)"
std::string describe(OpType op, uint64_t seq, uint64_t count, DataType dt, RedOp redop, int root) {
  std::string s = fmt::format("{} #{} (count {}, {}", to_string(op), seq, count, to_string(dt));
  if (is_reducing(op)) s += fmt::format(", {}", to_string(redop));
  if (has_root(op)) s += fmt::format(", root {}", root);
  if (op == OpType::send) s += fmt::format(", to rank {}", root);
  return s + ")";
}

}  // namespace

transport::shm::CallSignature call_signature(const OpIdentity& id) {
  return {id.seq, id.count, id.root, static_cast<uint8_t>(id.op), static_cast<uint8_t>(id.dtype),
          static_cast<uint8_t>(id.redop), id.phase};
}

void check_same_call(const transport::shm::CallSignature& got, const OpIdentity& mine, int peer) {
  // What the peer must have called for its message to be what we expect.
  const OpType expected_op = mine.op == OpType::recv ? OpType::send : mine.op;
  const int expected_root = mine.op == OpType::recv ? mine.rank : mine.root;
  const auto got_op = static_cast<OpType>(got.op);
  const auto got_dt = static_cast<DataType>(got.dtype);
  const auto got_redop = static_cast<RedOp>(got.redop);
  bool same = got_op == expected_op && got.seq == mine.seq && got_dt == mine.dtype && got.phase == mine.phase;
  // A v-form whose ranks name their own counts: the payload sizes tell a difference.
  if (!has_per_rank_count(expected_op)) same = same && got.count == mine.count;
  if (is_reducing(expected_op)) same = same && got_redop == mine.redop;
  if (has_root(expected_op) || expected_op == OpType::send) same = same && got.root == expected_root;
  if (same) return;
  const std::string theirs = describe(got_op, got.seq, got.count, got_dt, got_redop, got.root);
  const std::string ours = mine.op == OpType::recv
      ? fmt::format("recv #{} (count {}, {}, from rank {})", mine.seq, mine.count, to_string(mine.dtype), peer)
      : describe(mine.op, mine.seq, mine.count, mine.dtype, mine.redop, mine.root);
  throw_error(ErrorCode::mismatch,
              fmt::format("mismatched calls: rank {} called {} while rank {} called {}", peer, theirs, mine.rank, ours),
              ErrorContext{mine.rank, std::string(to_string(mine.op)), mine.seq, peer});
}

void check_declared_call(const std::optional<transport::shm::CallSignature>& declared, const OpIdentity& mine,
                         int peer) {
  if (declared && declared->seq == mine.seq && declared->phase == mine.phase) check_same_call(*declared, mine, peer);
}

void check_header(const transport::FrameHeader& got, const OpIdentity& mine, int peer,
                  uint64_t expected_payload, size_t elem_bytes) {
  ErrorContext ctx{mine.rank, std::string(to_string(mine.op)), mine.seq, peer};
  if (auto bad = transport::validate_frame(got)) {
    throw_error(ErrorCode::protocol,
                fmt::format("received a malformed message header from rank {}: {}", peer, *bad), ctx);
  }
  if (got.comm_id != mine.comm_id || got.src_rank != peer) {
    throw_error(ErrorCode::protocol,
                fmt::format("message from rank {} carries communicator {:#x} / rank {}, expected "
                            "communicator {:#x} / rank {}",
                            peer, got.comm_id, got.src_rank, mine.comm_id, peer),
                ctx);
  }
  check_same_call({got.seq, got.count, got.root, got.op, got.dtype, got.redop, got.flags}, mine, peer);
  if (got.payload_bytes != expected_payload) {
    auto elements = [&](uint64_t bytes) {
      return elem_bytes > 0 && bytes % elem_bytes == 0 ? fmt::format(" ({} elements)", bytes / elem_bytes)
                                                       : std::string();
    };
    throw_error(ErrorCode::mismatch,
                fmt::format("mismatched counts in {} #{}: rank {} sends {} bytes{} to rank {}, which expects {} "
                            "bytes{} from it",
                            to_string(mine.op), mine.seq, peer, got.payload_bytes, elements(got.payload_bytes),
                            mine.rank, expected_payload, elements(expected_payload)),
                ctx);
  }
}

}  // namespace hoop::engine
