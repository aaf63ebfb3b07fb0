#include "bootstrap/host_id.h"

#include <unistd.h>

#include <climits>
#include <cstdlib>

#include "core/params.h"
#include <fstream>
#include <string>

namespace hoop::bootstrap {

namespace {

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

std::string boot_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  id = trimmed(id);
  return id.empty() ? "no-boot-id" : id;
}

// The inode of this process's network namespace: the link reads "net:[4026531840]".
std::string net_namespace() {
  char buf[128];
  ssize_t n = ::readlink("/proc/self/ns/net", buf, sizeof buf - 1);
  if (n <= 0) return "no-netns";
  std::string link(buf, static_cast<size_t>(n));
  const size_t open = link.find('[');
  const size_t close = link.find(']');
  if (open == std::string::npos || close == std::string::npos || close < open) return link;
  return link.substr(open + 1, close - open - 1);
}

}  // namespace

std::string hostname() {
  char buf[HOST_NAME_MAX + 1] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

std::string machine_id() { return hostname() + "/" + boot_id(); }

std::string host_id() {
  if (auto forced = params::text(params::Id::host_id)) return *forced;
  // Computed per call: a process that enters another network namespace changes host.
  return hostname() + "/" + boot_id() + "/" + net_namespace();
}

}  // namespace hoop::bootstrap
