#include "core/env.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include "core/errors.h"

namespace hoop::env {

std::optional<std::string> get(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

std::string get_or(const char* name, const std::string& fallback) {
  auto v = get(name);
  return v ? *v : fallback;
}

std::optional<int64_t> get_int(const char* name) {
  auto v = get(name);
  if (!v) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  long long x = std::strtoll(v->c_str(), &end, 10);
  if (errno != 0 || end == v->c_str() || *end != '\0') {
    throw_error(ErrorCode::invalid_argument,
                fmt::format("environment variable {}='{}' is not an integer", name, *v));
  }
  return static_cast<int64_t>(x);
}

std::optional<std::chrono::milliseconds> get_seconds(const char* name) {
  auto v = get(name);
  if (!v) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  double s = std::strtod(v->c_str(), &end);
  if (errno != 0 || end == v->c_str() || *end != '\0' || !std::isfinite(s) || s < 0) {
    throw_error(ErrorCode::invalid_argument,
                fmt::format("environment variable {}='{}' is not a number of seconds", name, *v));
  }
  return std::chrono::milliseconds(static_cast<int64_t>(std::llround(s * 1000.0)));
}

std::optional<int64_t> parse_int(std::string_view text) {
  int64_t v = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  return v;
}

std::optional<uint64_t> parse_size(const std::string& text) {
  if (text.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  double x = std::strtod(text.c_str(), &end);
  if (errno != 0 || end == text.c_str() || x < 0 || !std::isfinite(x)) return std::nullopt;
  uint64_t mult = 1;
  std::string suffix(end);
  if (!suffix.empty() && (suffix.back() == 'B' || suffix.back() == 'b')) suffix.pop_back();
  if (suffix.size() == 2 && (suffix[1] == 'i' || suffix[1] == 'I')) suffix.pop_back();
  if (suffix.empty()) mult = 1;
  else if (suffix == "K" || suffix == "k") mult = 1ull << 10;
  else if (suffix == "M" || suffix == "m") mult = 1ull << 20;
  else if (suffix == "G" || suffix == "g") mult = 1ull << 30;
  else if (suffix == "T" || suffix == "t") mult = 1ull << 40;
  else return std::nullopt;
  return static_cast<uint64_t>(std::llround(x * static_cast<double>(mult)));
}

std::optional<uint64_t> get_size(const char* name) {
  auto v = get(name);
  if (!v) return std::nullopt;
  auto s = parse_size(*v);
  if (!s) {
    throw_error(ErrorCode::invalid_argument,
                fmt::format("environment variable {}='{}' is not a size (e.g. 64K, 4M)", name, *v));
  }
  return s;
}

}  // namespace hoop::env
