// Rates and durations on hoop-sim's command line: "200Gbps", "100Gbit", "25GB/s", "12.5GBps",
// "800MB/s"; "5us", "1.5ms", "800ns", "2s". Bits per second when the unit says bit (b, bps,
// bit), bytes per second when it says B or byte. Decimal prefixes (k, M, G, T).
#pragma once

#include <cctype>
#include <cstdlib>
#include <optional>
#include <string>

namespace hoop::sim {

inline std::optional<double> parse_number_prefix(const std::string& text, std::string& unit) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || !(v >= 0)) return std::nullopt;
  unit = std::string(end);
  return v;
}

// Bytes per second.
inline std::optional<double> parse_rate(const std::string& text) {
  std::string unit;
  auto v = parse_number_prefix(text, unit);
  if (!v || unit.empty()) return std::nullopt;
  double scale = 1;
  size_t i = 0;
  switch (unit[0]) {
    case 'k': case 'K': scale = 1e3; i = 1; break;
    case 'M': scale = 1e6; i = 1; break;
    case 'G': scale = 1e9; i = 1; break;
    case 'T': scale = 1e12; i = 1; break;
    default: break;
  }
  const std::string rest = unit.substr(i);
  if (rest == "bps" || rest == "bit" || rest == "bit/s" || rest == "b/s" || rest == "b") return *v * scale / 8;
  if (rest == "B/s" || rest == "Bps" || rest == "B" || rest == "byte/s") return *v * scale;
  return std::nullopt;
}

// Seconds.
inline std::optional<double> parse_duration(const std::string& text) {
  std::string unit;
  auto v = parse_number_prefix(text, unit);
  if (!v) return std::nullopt;
  if (unit == "s" || unit.empty()) return *v;
  if (unit == "ms") return *v * 1e-3;
  if (unit == "us") return *v * 1e-6;
  if (unit == "ns") return *v * 1e-9;
  return std::nullopt;
}

}  // namespace hoop::sim
