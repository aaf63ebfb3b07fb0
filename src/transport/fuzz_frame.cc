// libFuzzer target for the message header every operation's traffic starts with: the 64
// bytes a peer (or a stranger past the handshake) sends are judged by validate_frame and then
// by the engine's check against the receiver's own call. Built apart from the library (`make
// fuzz`), from the source root:
//   clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -Iinclude -Isrc
//     src/transport/fuzz_frame.cc src/transport/frame.cc src/engine/frame_check.cc
//     src/core/error.cc src/core/types.cc -lfmt
// Input: 64 header bytes, then bytes that choose the receiver's call (so that calls that
// nearly match are explored too). Properties: never a crash or an over-read; a header is
// accepted only if it is well-formed and every field the call depends on equals the
// receiver's own; every refusal is a hoop::Error whose message names the sender and, for a
// mismatch, both calls.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "engine/frame_check.h"
#include "hoop/error.h"
#include "transport/frame.h"

namespace {

void require(bool ok) {
  if (!ok) std::abort();
}

// Reads the next bytes of the input (zeros past its end).
struct Cursor {
  const uint8_t* data;
  size_t size;
  size_t at = 0;
  uint64_t take(size_t n) {
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v |= uint64_t{at < size ? data[at++] : uint8_t{0}} << (8 * i);
    return v;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using hoop::transport::FrameHeader;
  FrameHeader got;
  std::memcpy(&got, data, size < sizeof got ? size : sizeof got);
  if (size < sizeof got) std::memset(reinterpret_cast<uint8_t*>(&got) + size, 0, sizeof got - size);

  const auto verdict = hoop::transport::validate_frame(got);
  if (verdict) require(!verdict->empty());

  // The receiver's call: either derived from the header itself with a few fields changed
  // (near misses) or drawn from the remaining bytes.
  Cursor c{data, size, sizeof got};
  hoop::engine::OpIdentity mine;
  const uint64_t mode = c.take(1);
  mine.op = static_cast<hoop::OpType>(got.op % 8);
  mine.dtype = static_cast<hoop::DataType>(got.dtype % 10);
  mine.redop = static_cast<hoop::RedOp>(got.redop % 5);
  mine.count = got.count;
  mine.root = got.root;
  mine.seq = got.seq;
  mine.comm_id = got.comm_id;
  mine.phase = got.flags;
  if (mode & 1) mine.count = c.take(8);
  if (mode & 2) mine.seq = c.take(8);
  if (mode & 4) mine.root = static_cast<int>(c.take(4));
  if (mode & 8) mine.op = static_cast<hoop::OpType>(c.take(1) % 8);
  const int peer = static_cast<int>(c.take(2) % 1024);
  mine.rank = static_cast<int>(c.take(2) % 1024);
  const uint64_t expected_payload = (mode & 16) ? c.take(8) : got.payload_bytes;

  try {
    hoop::engine::check_header(got, mine, peer, expected_payload);
    // Accepted: well-formed, from the peer, of this communicator, with the payload expected.
    require(!verdict);
    require(got.src_rank == peer && got.comm_id == mine.comm_id);
    require(got.payload_bytes == expected_payload);
    require(got.seq == mine.seq && got.count == mine.count && got.flags == mine.phase);
  } catch (const hoop::Error& e) {
    const std::string what = e.what();
    require(!what.empty());
    require(what.find("rank " + std::to_string(peer)) != std::string::npos);
    if (e.code() == hoop::ErrorCode::mismatch) require(what.find(" called ") != std::string::npos ||
                                                       what.find(" bytes") != std::string::npos);
  }
  return 0;
}
