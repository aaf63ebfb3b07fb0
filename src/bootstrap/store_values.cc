#include "bootstrap/store_values.h"

#include <fmt/format.h>

#include <charconv>

namespace hoop::bootstrap {

std::optional<int64_t> parse_decimal(std::string_view text) {
  if (text.empty()) return std::nullopt;
  int64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

bool apply_add(const Bytes* current, int64_t delta, int64_t* result, std::string* error) {
  int64_t base = 0;
  if (current) {
    std::string_view text(reinterpret_cast<const char*>(current->data()), current->size());
    auto parsed = parse_decimal(text);
    if (!parsed) {
      *error = fmt::format("the stored value is not a decimal integer ({} bytes)", current->size());
      return false;
    }
    base = *parsed;
  }
  if (__builtin_add_overflow(base, delta, result)) {
    *error = fmt::format("{} + {} overflows a 64-bit integer", base, delta);
    return false;
  }
  return true;
}

Bytes to_bytes(std::string_view text) { return Bytes(text.begin(), text.end()); }

}  // namespace hoop::bootstrap
