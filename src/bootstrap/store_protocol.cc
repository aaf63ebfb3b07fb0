#include "bootstrap/store_protocol.h"

#include <fmt/format.h>

#include <cstring>

namespace hoop::bootstrap {

namespace {

// Reads little-endian fields from the front of a buffer that may end early. Every read
// returns false when the buffer is too short (the caller answers need_more).
class Reader {
 public:
  Reader(const uint8_t* buf, size_t len) : buf_(buf), len_(len) {}

  bool u8(uint8_t* v) {
    if (len_ - pos_ < 1) return false;
    *v = buf_[pos_++];
    return true;
  }
  bool u32(uint32_t* v) {
    if (len_ - pos_ < 4) return false;
    uint32_t x = 0;
    for (int i = 3; i >= 0; --i) x = (x << 8) | buf_[pos_ + static_cast<size_t>(i)];
    pos_ += 4;
    *v = x;
    return true;
  }
  bool i64(int64_t* v) {
    if (len_ - pos_ < 8) return false;
    uint64_t x = 0;
    for (int i = 7; i >= 0; --i) x = (x << 8) | buf_[pos_ + static_cast<size_t>(i)];
    pos_ += 8;
    *v = static_cast<int64_t>(x);
    return true;
  }
  // Skips n bytes, returning where they start.
  bool bytes(size_t n, const uint8_t** start) {
    if (len_ - pos_ < n) return false;
    *start = buf_ + pos_;
    pos_ += n;
    return true;
  }
  // The magic is checked byte by byte so that garbage is refused from its first byte.
  ParseStatus magic(std::string* error) {
    for (size_t i = 0; i < 4; ++i) {
      if (pos_ + i >= len_) return ParseStatus::need_more;
      if (buf_[pos_ + i] != static_cast<uint8_t>(kStoreMagic >> (8 * i))) {
        *error = fmt::format("bad magic (byte {} is 0x{:02x}, not a hoop store message)", i,
                             buf_[pos_ + i]);
        return ParseStatus::malformed;
      }
    }
    pos_ += 4;
    return ParseStatus::complete;
  }
  size_t pos() const { return pos_; }

 private:
  const uint8_t* buf_;
  size_t len_;
  size_t pos_ = 0;
};

void put_u32(std::vector<uint8_t>* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<uint8_t>(v >> (8 * i)));
}

void put_i64(std::vector<uint8_t>* out, int64_t v) {
  auto u = static_cast<uint64_t>(v);
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<uint8_t>(u >> (8 * i)));
}

void put_bytes(std::vector<uint8_t>* out, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  out->insert(out->end(), p, p + n);
}

bool valid_cmd(uint8_t c) {
  return c >= static_cast<uint8_t>(StoreCmd::set) && c <= static_cast<uint8_t>(StoreCmd::hello);
}

bool has_timeout(StoreCmd cmd) { return cmd == StoreCmd::get || cmd == StoreCmd::wait; }

// How many values each command carries; -1: any number (WAIT).
int expected_values(StoreCmd cmd) {
  switch (cmd) {
    case StoreCmd::set: return 1;
    case StoreCmd::add: return 1;
    case StoreCmd::hello: return 1;
    case StoreCmd::compare_set: return 2;
    case StoreCmd::wait: return -1;
    case StoreCmd::get:
    case StoreCmd::check:
    case StoreCmd::remove: return 0;
  }
  return 0;
}

struct Span {
  const uint8_t* data;
  size_t size;
};

// Reads `count` length-prefixed values, each at most max_len bytes.
ParseStatus read_values(Reader& r, uint32_t count, size_t max_len, const char* what,
                        std::vector<Span>* spans, std::string* error) {
  spans->clear();
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t n = 0;
    if (!r.u32(&n)) return ParseStatus::need_more;
    if (n > max_len) {
      *error = fmt::format("{} {} has length {} (limit {})", what, i, n, max_len);
      return ParseStatus::malformed;
    }
    const uint8_t* start = nullptr;
    if (!r.bytes(n, &start)) return ParseStatus::need_more;
    spans->push_back({start, n});
  }
  return ParseStatus::complete;
}

std::vector<std::vector<uint8_t>> to_values(const std::vector<Span>& spans) {
  std::vector<std::vector<uint8_t>> values;
  values.reserve(spans.size());
  for (const Span& s : spans) values.emplace_back(s.data, s.data + s.size);
  return values;
}

}  // namespace

std::string_view to_string(StoreCmd cmd) noexcept {
  switch (cmd) {
    case StoreCmd::set: return "set";
    case StoreCmd::get: return "get";
    case StoreCmd::add: return "add";
    case StoreCmd::compare_set: return "compare_set";
    case StoreCmd::wait: return "wait";
    case StoreCmd::check: return "check";
    case StoreCmd::remove: return "remove";
    case StoreCmd::hello: return "hello";
  }
  return "unknown";
}

ParseStatus parse_store_request(const uint8_t* buf, size_t len, StoreRequest* out,
                                size_t* consumed, std::string* error) {
  Reader r(buf, len);
  if (ParseStatus s = r.magic(error); s != ParseStatus::complete) return s;
  uint8_t raw_cmd = 0;
  if (!r.u8(&raw_cmd)) return ParseStatus::need_more;
  if (!valid_cmd(raw_cmd)) {
    *error = fmt::format("unknown command {}", raw_cmd);
    return ParseStatus::malformed;
  }
  const auto cmd = static_cast<StoreCmd>(raw_cmd);
  uint32_t key_len = 0;
  if (!r.u32(&key_len)) return ParseStatus::need_more;
  if (key_len > kMaxStoreKey) {
    *error = fmt::format("{}: key length {} exceeds the limit {}", to_string(cmd), key_len,
                         kMaxStoreKey);
    return ParseStatus::malformed;
  }
  const bool keyless = cmd == StoreCmd::wait || cmd == StoreCmd::hello;
  if (keyless ? key_len != 0 : key_len == 0) {
    *error = fmt::format("{}: {} key", to_string(cmd), key_len == 0 ? "empty" : "unexpected");
    return ParseStatus::malformed;
  }
  const uint8_t* key = nullptr;
  if (!r.bytes(key_len, &key)) return ParseStatus::need_more;
  uint32_t n_values = 0;
  if (!r.u32(&n_values)) return ParseStatus::need_more;
  const int expected = expected_values(cmd);
  if (n_values > kMaxStoreValues || (expected >= 0 && n_values != static_cast<uint32_t>(expected))) {
    *error = expected >= 0 ? fmt::format("{}: {} values, expected {}", to_string(cmd), n_values,
                                         expected)
                           : fmt::format("{}: {} keys exceed the limit {}", to_string(cmd),
                                         n_values, kMaxStoreValues);
    return ParseStatus::malformed;
  }
  std::vector<Span> spans;
  const bool keys_as_values = cmd == StoreCmd::wait;
  ParseStatus vs = read_values(r, n_values, keys_as_values ? kMaxStoreKey : kMaxStoreValue,
                               keys_as_values ? "key" : "value", &spans, error);
  if (vs != ParseStatus::complete) return vs;
  if (keys_as_values) {
    for (size_t i = 0; i < spans.size(); ++i) {
      if (spans[i].size == 0) {
        *error = fmt::format("wait: key {} is empty", i);
        return ParseStatus::malformed;
      }
    }
  }
  int64_t timeout_ms = 0;
  if (has_timeout(cmd)) {
    if (!r.i64(&timeout_ms)) return ParseStatus::need_more;
    if (timeout_ms < 0) {
      *error = fmt::format("{}: negative timeout {} ms", to_string(cmd), timeout_ms);
      return ParseStatus::malformed;
    }
  }
  out->cmd = cmd;
  out->key.assign(reinterpret_cast<const char*>(key), key_len);
  out->values = to_values(spans);
  out->timeout_ms = timeout_ms;
  *consumed = r.pos();
  return ParseStatus::complete;
}

std::vector<uint8_t> encode_store_request(const StoreRequest& req) {
  std::vector<uint8_t> out;
  size_t total = 4 + 1 + 4 + req.key.size() + 4 + 8;
  for (const auto& v : req.values) total += 4 + v.size();
  out.reserve(total);
  put_u32(&out, kStoreMagic);
  out.push_back(static_cast<uint8_t>(req.cmd));
  put_u32(&out, static_cast<uint32_t>(req.key.size()));
  put_bytes(&out, req.key.data(), req.key.size());
  put_u32(&out, static_cast<uint32_t>(req.values.size()));
  for (const auto& v : req.values) {
    put_u32(&out, static_cast<uint32_t>(v.size()));
    put_bytes(&out, v.data(), v.size());
  }
  if (has_timeout(req.cmd)) put_i64(&out, req.timeout_ms);
  return out;
}

ParseStatus parse_store_response(const uint8_t* buf, size_t len, StoreResponse* out,
                                 size_t* consumed, std::string* error) {
  Reader r(buf, len);
  if (ParseStatus s = r.magic(error); s != ParseStatus::complete) return s;
  uint8_t status = 0;
  if (!r.u8(&status)) return ParseStatus::need_more;
  if (status > static_cast<uint8_t>(StoreStatus::bad_request)) {
    *error = fmt::format("unknown status {}", status);
    return ParseStatus::malformed;
  }
  uint32_t n_values = 0;
  if (!r.u32(&n_values)) return ParseStatus::need_more;
  if (n_values > kMaxStoreValues) {
    *error = fmt::format("{} values exceed the limit {}", n_values, kMaxStoreValues);
    return ParseStatus::malformed;
  }
  std::vector<Span> spans;
  ParseStatus vs = read_values(r, n_values, kMaxStoreValue, "value", &spans, error);
  if (vs != ParseStatus::complete) return vs;
  out->status = static_cast<StoreStatus>(status);
  out->values = to_values(spans);
  *consumed = r.pos();
  return ParseStatus::complete;
}

void encode_store_response(const StoreResponse& resp, std::vector<uint8_t>* out) {
  put_u32(out, kStoreMagic);
  out->push_back(static_cast<uint8_t>(resp.status));
  put_u32(out, static_cast<uint32_t>(resp.values.size()));
  for (const auto& v : resp.values) {
    put_u32(out, static_cast<uint32_t>(v.size()));
    put_bytes(out, v.data(), v.size());
  }
}

std::vector<uint8_t> encode_secret_key(uint64_t key) {
  std::vector<uint8_t> out;
  put_i64(&out, static_cast<int64_t>(key));
  return out;
}

std::optional<uint64_t> parse_secret_key(const std::vector<uint8_t>& value) noexcept {
  if (value.size() != 8) return std::nullopt;
  uint64_t key = 0;
  for (size_t i = 0; i < 8; ++i) key |= static_cast<uint64_t>(value[i]) << (8 * i);
  return key;
}

}  // namespace hoop::bootstrap
