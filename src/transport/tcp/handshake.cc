#include "transport/tcp/handshake.h"

#include <fmt/format.h>

namespace hoop::transport::tcp {

namespace {

template <typename T>
void put_le(std::byte* out, T value) {
  auto u = static_cast<std::make_unsigned_t<T>>(value);
  for (size_t i = 0; i < sizeof(T); ++i) out[i] = static_cast<std::byte>((u >> (8 * i)) & 0xff);
}

template <typename T>
T get_le(const std::byte* in) {
  std::make_unsigned_t<T> u = 0;
  for (size_t i = 0; i < sizeof(T); ++i) {
    u |= static_cast<std::make_unsigned_t<T>>(std::to_integer<uint8_t>(in[i])) << (8 * i);
  }
  return static_cast<T>(u);
}

// Byte offsets inside the Hello.
constexpr size_t kMagicAt = 0, kVersionAt = 4, kJobAt = 8, kSecretAt = 16, kCommAt = 24,
                 kFromAt = 32, kToAt = 36, kChannelAt = 40;

}  // namespace

std::string_view to_string(HelloStatus status) noexcept {
  switch (status) {
    case HelloStatus::ok: return "ok";
    case HelloStatus::wrong_job: return "wrong job id";
    case HelloStatus::wrong_secret: return "wrong secret (HOOP_SECRET differs)";
    case HelloStatus::malformed: return "malformed handshake";
  }
  return "unknown status";
}

uint64_t fnv1a64(std::string_view text) noexcept {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : text) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

std::array<std::byte, kHelloBytes> encode_hello(const Hello& hello) {
  std::array<std::byte, kHelloBytes> out{};  // reserved fields stay zero
  put_le<uint32_t>(&out[kMagicAt], kHelloMagic);
  put_le<uint16_t>(&out[kVersionAt], kHelloVersion);
  put_le<uint64_t>(&out[kJobAt], hello.job_key);
  put_le<uint64_t>(&out[kSecretAt], hello.secret_key);
  put_le<uint64_t>(&out[kCommAt], hello.comm_id);
  put_le<int32_t>(&out[kFromAt], hello.from_rank);
  put_le<int32_t>(&out[kToAt], hello.to_rank);
  put_le<int32_t>(&out[kChannelAt], hello.channel);
  return out;
}

HelloVerdict check_hello(std::span<const std::byte> bytes, uint64_t job_key,
                         uint64_t secret_key) noexcept {
  HelloVerdict v;
  try {
    if (bytes.size() != kHelloBytes) {
      v.reason = fmt::format("handshake of {} bytes (expected {})", bytes.size(), kHelloBytes);
      return v;
    }
    const std::byte* p = bytes.data();
    const auto magic = get_le<uint32_t>(p + kMagicAt);
    if (magic != kHelloMagic) {
      v.reason = fmt::format("bad handshake magic {:#010x} (not a hoop TCP peer)", magic);
      return v;
    }
    const auto version = get_le<uint16_t>(p + kVersionAt);
    if (version != kHelloVersion) {
      v.reason = fmt::format("handshake version {} (this build speaks {})", version, kHelloVersion);
      return v;
    }
    v.hello.job_key = get_le<uint64_t>(p + kJobAt);
    v.hello.secret_key = get_le<uint64_t>(p + kSecretAt);
    v.hello.comm_id = get_le<uint64_t>(p + kCommAt);
    v.hello.from_rank = get_le<int32_t>(p + kFromAt);
    v.hello.to_rank = get_le<int32_t>(p + kToAt);
    v.hello.channel = get_le<int32_t>(p + kChannelAt);
    if (v.hello.from_rank < 0 || v.hello.to_rank < 0 || v.hello.channel < 0) {
      v.reason = fmt::format("negative rank or channel in handshake (from {}, to {}, channel {})",
                             v.hello.from_rank, v.hello.to_rank, v.hello.channel);
      return v;
    }
    if (v.hello.job_key != job_key) {
      v.status = HelloStatus::wrong_job;
      v.reason = fmt::format("job key {:#018x} is not this job's ({:#018x})", v.hello.job_key,
                             job_key);
      return v;
    }
    if (v.hello.secret_key != secret_key) {
      v.status = HelloStatus::wrong_secret;
      v.reason = "secret key does not match (HOOP_SECRET differs)";
      return v;
    }
    v.status = HelloStatus::ok;
  } catch (...) {  // only fmt's allocation can throw; a verdict must still be returned
    v.status = HelloStatus::malformed;
  }
  return v;
}

std::array<std::byte, kReplyBytes> encode_reply(HelloStatus status) {
  std::array<std::byte, kReplyBytes> out{};
  put_le<uint32_t>(&out[0], kHelloMagic);
  put_le<uint32_t>(&out[4], static_cast<uint32_t>(status));
  return out;
}

std::optional<HelloStatus> parse_reply(std::span<const std::byte> bytes) noexcept {
  if (bytes.size() != kReplyBytes || get_le<uint32_t>(bytes.data()) != kHelloMagic) {
    return std::nullopt;
  }
  const auto status = get_le<uint32_t>(bytes.data() + 4);
  if (status > static_cast<uint32_t>(HelloStatus::malformed)) return std::nullopt;
  return static_cast<HelloStatus>(status);
}

}  // namespace hoop::transport::tcp
