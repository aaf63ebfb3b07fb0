// libFuzzer target for the TCP handshake parser: any bytes a stranger sends to a hoop port
// must produce a verdict (never a crash, never "ok" unless they are a well-formed Hello with
// this job's keys), and replies must parse only when well-formed.
//
// Build and run (from the source root):
//   clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -Isrc -Iinclude
//           src/transport/tcp/fuzz_handshake.cc src/transport/tcp/handshake.cc -lfmt
//   ./a.out -max_total_time=30 -max_len=128
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>

#include "transport/tcp/handshake.h"

namespace {

using namespace hoop::transport::tcp;

constexpr uint64_t kJobKey = 0x0123456789abcdefull;
constexpr uint64_t kSecretKey = 0xfedcba9876543210ull;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  const HelloVerdict v = check_hello(bytes, kJobKey, kSecretKey);
  if (v.status == HelloStatus::ok) {
    // Accepted: it must be exactly a Hello of this job, and encode back to the same bytes
    // apart from the reserved fields.
    if (size != kHelloBytes || v.hello.job_key != kJobKey || v.hello.secret_key != kSecretKey ||
        v.hello.from_rank < 0 || v.hello.to_rank < 0 || v.hello.channel < 0) {
      std::abort();
    }
    auto again = encode_hello(v.hello);
    if (std::memcmp(again.data(), data, 6) != 0 || std::memcmp(again.data() + 8, data + 8, 36) != 0) {
      std::abort();
    }
  } else if (v.reason.empty()) {
    std::abort();  // every refusal says why (it is logged)
  }
  if (auto status = parse_reply(bytes)) {
    // A reply has no spare bits: what parses must be exactly what encode_reply writes.
    if (size != kReplyBytes || std::memcmp(encode_reply(*status).data(), data, kReplyBytes) != 0) {
      std::abort();
    }
  }
  return 0;
}
