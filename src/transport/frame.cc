#include "transport/frame.h"

#include <fmt/format.h>

#include "hoop/types.h"

namespace hoop::transport {

namespace {

// The four magic bytes as text when printable ("HOOP"), so a foreign protocol is recognisable
// in the message (an HTTP client shows "GET ").
std::string magic_text(uint32_t magic) {
  std::string text;
  for (int i = 0; i < 4; ++i) {
    const auto c = static_cast<unsigned char>(magic >> (8 * i));
    if (c < 0x20 || c > 0x7e) return {};
    text += static_cast<char>(c);
  }
  return fmt::format(" '{}'", text);
}

}  // namespace

std::optional<std::string> validate_frame(const FrameHeader& h) {
  if (h.magic != kFrameMagic) {
    return fmt::format("bad frame magic {:#010x}{} (expected {:#010x}{})", h.magic,
                       magic_text(h.magic), kFrameMagic, magic_text(kFrameMagic));
  }
  if (h.version != kFrameVersion) {
    return fmt::format("unsupported frame version {} (expected {})", h.version, kFrameVersion);
  }
  if (h.op > static_cast<uint8_t>(OpType::reducescatterv)) {
    return fmt::format("unknown op {} in frame", h.op);
  }
  if (!is_valid(static_cast<DataType>(h.dtype))) {
    return fmt::format("unknown dtype {} in frame", h.dtype);
  }
  if (!is_valid(static_cast<RedOp>(h.redop))) {
    return fmt::format("unknown reduction op {} in frame", h.redop);
  }
  return std::nullopt;
}

}  // namespace hoop::transport
