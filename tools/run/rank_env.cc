#include "rank_env.h"

#include <map>

extern char** environ;

namespace hoop::run {

std::vector<std::string> current_environment() {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) env.emplace_back(*e);
  return env;
}

std::optional<std::string> find_env(const std::vector<std::string>& env, const std::string& name) {
  for (const auto& entry : env) {
    if (entry.size() > name.size() && entry[name.size()] == '=' && entry.compare(0, name.size(), name) == 0)
      return entry.substr(name.size() + 1);
  }
  return std::nullopt;
}

std::vector<std::string> rank_environment(const JobEnvironment& job, int rank,
                                          const std::vector<std::string>& inherited) {
  // Ordered by name so that the child's environment is the same from run to run.
  std::map<std::string, std::string> vars;
  for (const auto& entry : inherited) {
    auto eq = entry.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    vars[entry.substr(0, eq)] = entry.substr(eq + 1);
  }

  const std::string r = std::to_string(rank);
  const std::string n = std::to_string(job.nranks);
  const std::pair<const char*, std::string> launcher_vars[] = {
      // hoop's own bootstrap (see src/bootstrap/env_init.h).
      {"HOOP_RANK", r},
      {"HOOP_WORLD_SIZE", n},
      {"HOOP_LOCAL_RANK", r},
      {"HOOP_LOCAL_SIZE", n},
      {"HOOP_STORE_ADDR", job.store_addr},
      {"HOOP_JOB_ID", job.job_id},
      {"HOOP_RESTART_COUNT", std::to_string(job.restart_count)},
      // torchrun's, for torch.distributed's env:// initialisation (all ranks on this host).
      {"RANK", r},
      {"WORLD_SIZE", n},
      {"LOCAL_RANK", r},
      {"LOCAL_WORLD_SIZE", n},
      {"GROUP_RANK", "0"},
      {"GROUP_WORLD_SIZE", "1"},
      {"ROLE_RANK", r},
      {"ROLE_WORLD_SIZE", n},
      {"MASTER_ADDR", "127.0.0.1"},
      {"MASTER_PORT", std::to_string(job.master_port)},
      {"TORCHELASTIC_RESTART_COUNT", std::to_string(job.restart_count)},
  };
  for (const auto& [name, value] : launcher_vars) vars[name] = value;
  // Like torchrun: N ranks each running as many OpenMP threads as there are cores would
  // oversubscribe the host many times over.
  if (job.nranks > 1 && !vars.contains("OMP_NUM_THREADS")) vars["OMP_NUM_THREADS"] = std::string("1");

  for (const auto& [name, value] : job.extra) vars[name] = value;

  std::vector<std::string> env;
  env.reserve(vars.size());
  for (const auto& [name, value] : vars) env.push_back(name + "=" + value);
  return env;
}

}  // namespace hoop::run
