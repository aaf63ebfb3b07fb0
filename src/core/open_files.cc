#include "core/open_files.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <mutex>

#include <fmt/format.h>

#include "core/log.h"

namespace hoop {

namespace {

std::mutex mu;

rlim_t soft_limit() {
  rlimit lim{};
  return ::getrlimit(RLIMIT_NOFILE, &lim) == 0 ? lim.rlim_cur : RLIM_INFINITY;
}

}  // namespace

bool raise_open_file_limit() {
  const std::lock_guard lock(mu);
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur >= lim.rlim_max) return false;
  const rlim_t old = lim.rlim_cur;
  lim.rlim_cur = lim.rlim_max;
  if (::setrlimit(RLIMIT_NOFILE, &lim) != 0) return false;
  HOOP_INFO("near the open-file limit of {}: raised it to {}", old, lim.rlim_max);
  return true;
}

int keep_link_descriptor(int fd, bool* retry) {
  *retry = false;
  if (fd < 0) {
    const int err = errno;
    *retry = err == EMFILE && raise_open_file_limit();
    errno = err;
    return -1;
  }
  // Descriptors are handed out lowest first: this one is among the last kLeftFree only when
  // every one below it is taken.
  const auto near = [fd] { return static_cast<rlim_t>(fd) + kLeftFree >= soft_limit(); };
  if (!near() || (raise_open_file_limit() && !near())) return fd;
  ::close(fd);
  errno = EMFILE;
  return -1;
}

std::string out_of_descriptors_note(int err) {
  if (err != EMFILE) return {};
  const rlim_t limit = soft_limit();
  if (limit == RLIM_INFINITY) return " (raise the open-file limit: `ulimit -n`)";
  return fmt::format(" (this process may open {} files, {} of them left to other than links: raise `ulimit -n`)",
                     limit, kLeftFree);
}

}  // namespace hoop
