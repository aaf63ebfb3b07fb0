#include "cpu_binding.h"

#include <sched.h>

#include <algorithm>

namespace hoop::run {

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

std::vector<int> plan_binding(const std::string& mode, const std::vector<bool>& here,
                              const std::vector<int>& cpus) {
  std::vector<int> plan(here.size(), -1);
  const auto local = static_cast<size_t>(std::count(here.begin(), here.end(), true));
  if (mode == "none" || cpus.empty() || local == 0) return plan;
  // One CPU alone cannot be shared out: pinning would only forbid nothing.
  if (cpus.size() == 1) return plan;
  size_t next = 0;
  for (size_t r = 0; r < here.size(); ++r) {
    if (!here[r]) continue;
    plan[r] = cpus[next % cpus.size()];
    ++next;
  }
  return plan;
}

}  // namespace hoop::run
