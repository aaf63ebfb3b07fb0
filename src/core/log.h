// Logging controlled by HOOP_DEBUG=WARN|INFO|TRACE (default: WARN). Lines go to stderr as
// "hoop <host>:<pid> [rank R] LEVEL message".
#pragma once

#include <fmt/format.h>

#include <string_view>

namespace hoop::log {

enum class Level { off = 0, warn = 1, info = 2, trace = 3 };

Level level() noexcept;  // parsed once from HOOP_DEBUG
inline bool enabled(Level l) noexcept { return static_cast<int>(l) <= static_cast<int>(level()); }
// The rank shown in log lines of this process (set by the communicator at init).
void set_rank(int rank) noexcept;
void write(Level l, std::string_view message);

}  // namespace hoop::log

#define HOOP_LOG(lvl, ...)                                                          \
  do {                                                                              \
    if (::hoop::log::enabled(::hoop::log::Level::lvl))                              \
      ::hoop::log::write(::hoop::log::Level::lvl, ::fmt::format(__VA_ARGS__));      \
  } while (0)
#define HOOP_WARN(...) HOOP_LOG(warn, __VA_ARGS__)
#define HOOP_INFO(...) HOOP_LOG(info, __VA_ARGS__)
#define HOOP_TRACE(...) HOOP_LOG(trace, __VA_ARGS__)
