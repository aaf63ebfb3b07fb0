// 64-bit FNV-1a, for ids derived from strings (job keys, communicator ids).
#pragma once

#include <cstdint>
#include <string_view>

namespace hoop {

constexpr uint64_t fnv1a64(std::string_view s, uint64_t h = 14695981039346656037ull) {
  for (char c : s) {
    h ^= static_cast<uint8_t>(c);
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace hoop
