// Wire format of the TCP store (shared by client, server and the fuzzer). Little-endian.
//   request:  u32 magic 'HSTR' | u8 cmd | u32 key_len | key | u32 n_values | (u32 len | bytes)*
//             | i64 timeout_ms (GET/WAIT only)
//   response: u32 magic | u8 status (0 ok, 1 timeout, 2 bad request) | u32 n_values | values...
// Limits: key <= 4 KiB, value <= 64 MiB, n_values <= 4096; anything else is a bad request and
// the server closes the connection.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace hoop::bootstrap {

inline constexpr uint32_t kStoreMagic = 0x52545348;  // "HSTR"

enum class StoreCmd : uint8_t { set = 1, get = 2, add = 3, compare_set = 4, wait = 5, check = 6,
                                remove = 7 };

struct StoreRequest {
  StoreCmd cmd = StoreCmd::set;
  std::string key;
  std::vector<std::vector<uint8_t>> values;
  int64_t timeout_ms = 0;
};

enum class ParseStatus { complete, need_more, malformed };

// Parses one request from the front of buf. On complete, *consumed is its length.
ParseStatus parse_store_request(const uint8_t* buf, size_t len, StoreRequest* out,
                                size_t* consumed, std::string* error);
std::vector<uint8_t> encode_store_request(const StoreRequest& req);

}  // namespace hoop::bootstrap
