// The header in front of every message on a link: one per operation and link, followed by
// that operation's payload for this link (padded to 8 bytes). The receiver checks it against
// its own call, so a stray byte stream or a mismatched call is reported, never read as data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace hoop::transport {

inline constexpr uint32_t kFrameMagic = 0x504F4F48;  // "HOOP" little-endian
inline constexpr uint16_t kFrameVersion = 1;

struct FrameHeader {
  uint32_t magic = kFrameMagic;
  uint16_t version = kFrameVersion;
  uint8_t op = 0;       // OpType
  uint8_t dtype = 0;    // DataType
  uint8_t redop = 0;    // RedOp
  uint8_t flags = 0;
  uint16_t reserved0 = 0;
  int32_t src_rank = -1;
  int32_t root = -1;    // root (broadcast/reduce) or destination (send); -1 otherwise
  uint64_t seq = 0;     // the op's sequence number on its communicator
  uint64_t count = 0;   // the op's element count argument
  uint64_t payload_bytes = 0;  // bytes that follow on this link for this op (before padding)
  uint64_t comm_id = 0;
  int64_t tag = 0;     // point-to-point messages: the send's tag
};
static_assert(sizeof(FrameHeader) == 64);

inline constexpr size_t padded_size(size_t bytes) { return (bytes + 7) & ~size_t{7}; }

// nullopt when the header is well-formed (magic, version, enum ranges); else what is wrong.
std::optional<std::string> validate_frame(const FrameHeader& h);

}  // namespace hoop::transport
