#include "core/log.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/params.h"

namespace hoop::log {

namespace {
std::atomic<int> g_rank{-1};

Level parse_level() {
  std::string s = *params::text(params::Id::debug);  // a malformed value reads as the default
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (s == "OFF" || s == "NONE" || s == "0") return Level::off;
  if (s == "INFO" || s == "1") return Level::info;
  if (s == "TRACE" || s == "DEBUG" || s == "2") return Level::trace;
  return Level::warn;
}

const char* name(Level l) {
  switch (l) {
    case Level::warn: return "WARN";
    case Level::info: return "INFO";
    case Level::trace: return "TRACE";
    case Level::off: break;
  }
  return "";
}
}  // namespace

Level level() noexcept {
  static const Level l = parse_level();
  return l;
}

void set_rank(int rank) noexcept { g_rank.store(rank, std::memory_order_relaxed); }

void write(Level l, std::string_view message) {
  char host[64] = {};
  ::gethostname(host, sizeof host - 1);
  std::string line = fmt::format("hoop {}:{}", host, ::getpid());
  int rank = g_rank.load(std::memory_order_relaxed);
  if (rank >= 0) line += fmt::format(" [rank {}]", rank);
  line += fmt::format(" {} {}\n", name(l), message);
  // One write call so lines of concurrent ranks do not interleave.
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace hoop::log
