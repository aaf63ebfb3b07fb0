// Typed access to environment variables, with errors that name the variable.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace hoop::env {

std::optional<std::string> get(const char* name);                  // unset or empty: nullopt
std::string get_or(const char* name, const std::string& fallback);
// Throws hoop::Error{invalid_argument} naming the variable when the value is not an integer.
std::optional<int64_t> get_int(const char* name);
// Seconds, fractional allowed ("0.5").
std::optional<std::chrono::milliseconds> get_seconds(const char* name);
// Sizes such as "64K", "1M", "2G" (powers of 1024) or plain bytes.
std::optional<uint64_t> get_size(const char* name);
// Parses a whole decimal integer ("-12"; no spaces, no '+'); nullopt when malformed.
std::optional<int64_t> parse_int(std::string_view text);
// Parses "64K"/"1M"/"2G"/"123"; nullopt when malformed.
std::optional<uint64_t> parse_size(const std::string& text);

}  // namespace hoop::env
