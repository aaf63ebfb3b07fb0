// The first bytes on every TCP connection of hoop: the connecting rank's Hello, answered by the
// accepting side with a one-word verdict. Both are fixed-size, little-endian, and parsed here
// from raw bytes only (no casts of foreign memory), so a stray client cannot confuse the parser.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace hoop::transport::tcp {

inline constexpr uint32_t kHelloMagic = 0x50435448;  // "HTCP" little-endian
inline constexpr uint16_t kHelloVersion = 1;
inline constexpr size_t kHelloBytes = 48;
inline constexpr size_t kReplyBytes = 8;

struct Hello {
  uint64_t job_key = 0;
  uint64_t secret_key = 0;
  uint64_t comm_id = 0;
  int32_t from_rank = -1;
  int32_t to_rank = -1;
  int32_t channel = 0;
};

enum class HelloStatus : uint32_t { ok = 0, wrong_job = 1, wrong_secret = 2, malformed = 3 };

std::string_view to_string(HelloStatus status) noexcept;

// 64-bit FNV-1a: job ids and secrets travel as these keys, never as text.
uint64_t fnv1a64(std::string_view text) noexcept;

std::array<std::byte, kHelloBytes> encode_hello(const Hello& hello);

struct HelloVerdict {
  HelloStatus status = HelloStatus::malformed;
  std::string reason;    // empty when ok
  Hello hello;           // meaningful when ok (and for wrong job/secret: what was sent)
};

// Judges exactly kHelloBytes received bytes against this listener's keys (any other length is
// malformed). Never throws.
HelloVerdict check_hello(std::span<const std::byte> bytes, uint64_t job_key,
                         uint64_t secret_key) noexcept;

std::array<std::byte, kReplyBytes> encode_reply(HelloStatus status);
// The status of a reply, or nullopt when the bytes are not a hoop reply (bad magic or size, or
// an unknown status).
std::optional<HelloStatus> parse_reply(std::span<const std::byte> bytes) noexcept;

}  // namespace hoop::transport::tcp
