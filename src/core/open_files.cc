#include "core/open_files.h"

#include <sys/resource.h>

#include <cerrno>
#include <mutex>

#include <fmt/format.h>

#include "core/log.h"

namespace hoop {

bool raise_open_file_limit() {
  static std::mutex mu;
  const std::lock_guard lock(mu);
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur >= lim.rlim_max) return false;
  const rlim_t old = lim.rlim_cur;
  lim.rlim_cur = lim.rlim_max;
  if (::setrlimit(RLIMIT_NOFILE, &lim) != 0) return false;
  HOOP_INFO("out of file descriptors at the open-file limit of {}: raised it to {}", old, lim.rlim_max);
  return true;
}

std::string open_file_limit_hint(int err) {
  if (err != EMFILE) return {};
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) return " (raise the open-file limit: `ulimit -n`)";
  return fmt::format(" (this process may open {} files: raise `ulimit -n`)", lim.rlim_cur);
}

}  // namespace hoop
