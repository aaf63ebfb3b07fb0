// The message header check: only well-formed headers of this protocol version pass.
#include <gtest/gtest.h>

#include <cstring>

#include "hoop/types.h"
#include "transport/frame.h"

namespace hoop::transport {
namespace {

FrameHeader valid_header() {
  FrameHeader h;
  h.op = static_cast<uint8_t>(OpType::allreduce);
  h.dtype = static_cast<uint8_t>(DataType::bf16);
  h.redop = static_cast<uint8_t>(RedOp::max);
  h.src_rank = 3;
  h.seq = 42;
  h.count = 1000;
  h.payload_bytes = 2000;
  h.comm_id = 0x1234;
  return h;
}

TEST(Frame, ValidHeaderPasses) {
  EXPECT_EQ(validate_frame(valid_header()), std::nullopt);
  EXPECT_EQ(validate_frame(FrameHeader{}), std::nullopt);  // defaults are a valid header
}

TEST(Frame, BadMagicIsNamed) {
  FrameHeader h = valid_header();
  std::memcpy(&h.magic, "GET ", 4);  // an HTTP client on the port
  auto err = validate_frame(h);
  ASSERT_TRUE(err);
  EXPECT_NE(err->find("magic"), std::string::npos) << *err;
  EXPECT_NE(err->find("'GET '"), std::string::npos) << *err;
  h.magic = 0;
  EXPECT_TRUE(validate_frame(h));
  h.magic = kFrameMagic ^ 0x01000000;
  EXPECT_TRUE(validate_frame(h));
}

TEST(Frame, OtherVersionIsRejected) {
  FrameHeader h = valid_header();
  h.version = kFrameVersion + 1;
  auto err = validate_frame(h);
  ASSERT_TRUE(err);
  EXPECT_NE(err->find("version 2"), std::string::npos) << *err;
  h.version = 0;
  EXPECT_TRUE(validate_frame(h));
}

// Every byte value of each enum field: exactly the enum's members pass.
TEST(Frame, EnumRangesAreExact) {
  for (int v = 0; v < 256; ++v) {
    FrameHeader h = valid_header();
    h.op = static_cast<uint8_t>(v);
    EXPECT_EQ(!validate_frame(h), v <= static_cast<int>(OpType::reducescatterv)) << "op " << v;
    h = valid_header();
    h.dtype = static_cast<uint8_t>(v);
    EXPECT_EQ(!validate_frame(h), v < static_cast<int>(kAllDataTypes.size())) << "dtype " << v;
    h = valid_header();
    h.redop = static_cast<uint8_t>(v);
    EXPECT_EQ(!validate_frame(h), v < static_cast<int>(kAllRedOps.size())) << "redop " << v;
  }
  FrameHeader h = valid_header();
  h.dtype = 200;
  auto err = validate_frame(h);
  ASSERT_TRUE(err);
  EXPECT_NE(err->find("dtype 200"), std::string::npos) << *err;
}

TEST(Frame, PaddedSize) {
  EXPECT_EQ(padded_size(0), 0u);
  EXPECT_EQ(padded_size(1), 8u);
  EXPECT_EQ(padded_size(8), 8u);
  EXPECT_EQ(padded_size(9), 16u);
}

}  // namespace
}  // namespace hoop::transport
