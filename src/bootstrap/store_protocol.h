// Wire format of the TCP store (shared by client, server and the fuzzer). Little-endian.
//   request:  u32 magic 'HSTR' | u8 cmd | u32 key_len | key | u32 n_values | (u32 len | bytes)*
//             | i64 timeout_ms (GET/WAIT only)
//   response: u32 magic | u8 status (0 ok, 1 timeout, 2 bad request) | u32 n_values | values...
// Limits: key <= 4 KiB, value <= 64 MiB, n_values <= 4096; anything else is a bad request and
// the server closes the connection.
// Values per command (anything else is malformed):
//   SET key [value]                      -> ok []
//   GET key [] timeout                   -> ok [value] | timeout []
//   ADD key [delta as decimal text]      -> ok [new value as decimal text] | bad request [why]
//   COMPARE_SET key [expected, desired]  -> ok [value now stored; empty when absent]
//   WAIT "" [key...] timeout             -> ok [] | timeout []   (the keys travel as values)
//   CHECK key []                         -> ok ["1" or "0"]
//   REMOVE key []                        -> ok ["1" if it existed, else "0"]
//   HELLO "" [secret key, u64]           -> ok [] | bad request [why], then closed
// Keys are never empty (WAIT's and HELLO's key fields are). A bad request reply (status 2)
// keeps the connection open: it answers a well-formed request the server cannot apply.
// A server with a secret (HOOP_SECRET) requires HELLO with its key as the first request of
// every connection; any other request first, or another key, is answered with a bad request
// and the connection closed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hoop::bootstrap {

inline constexpr uint32_t kStoreMagic = 0x52545348;  // "HSTR"
inline constexpr size_t kMaxStoreKey = 4096;
inline constexpr size_t kMaxStoreValue = size_t{64} << 20;
inline constexpr size_t kMaxStoreValues = 4096;

enum class StoreCmd : uint8_t { set = 1, get = 2, add = 3, compare_set = 4, wait = 5, check = 6,
                                remove = 7, hello = 8 };

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

enum class StoreStatus : uint8_t { ok = 0, timeout = 1, bad_request = 2 };

struct StoreResponse {
  StoreStatus status = StoreStatus::ok;
  std::vector<std::vector<uint8_t>> values;
};

// As parse_store_request, for the server's answers (the client's side).
ParseStatus parse_store_response(const uint8_t* buf, size_t len, StoreResponse* out,
                                 size_t* consumed, std::string* error);
// Appends the encoded response to *out (the server's output buffer).
void encode_store_response(const StoreResponse& resp, std::vector<uint8_t>* out);

std::string_view to_string(StoreCmd cmd) noexcept;

// The secret key a HELLO carries, little-endian (FNV-1a of the secret, as in the TCP
// handshake); parse_secret_key: nullopt unless exactly 8 bytes.
std::vector<uint8_t> encode_secret_key(uint64_t key);
std::optional<uint64_t> parse_secret_key(const std::vector<uint8_t>& value) noexcept;

}  // namespace hoop::bootstrap
