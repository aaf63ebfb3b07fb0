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

std::vector<std::pair<std::string, std::string>> job_variables(
    const JobEnvironment& job, int rank, const std::vector<std::string>& inherited) {
  const std::string r = std::to_string(rank);
  const std::string n = std::to_string(job.nranks);
  std::string local_rank = r, local_size = n, group_rank = "0", group_size = "1";
  const RankPlacement* place =
      job.placement.empty() ? nullptr : &job.placement.at(static_cast<size_t>(rank));
  if (place) {
    local_rank = std::to_string(place->local_rank);
    local_size = std::to_string(place->local_size);
    group_rank = std::to_string(place->host);
    group_size = std::to_string(job.placement.back().host + 1);
  }
  std::vector<std::pair<std::string, std::string>> vars = {
      // hoop's own bootstrap (see src/bootstrap/env_init.h).
      {"HOOP_RANK", r},
      {"HOOP_WORLD_SIZE", n},
      {"HOOP_LOCAL_RANK", local_rank},
      {"HOOP_LOCAL_SIZE", local_size},
      {"HOOP_STORE_ADDR", job.store_addr},
      {"HOOP_JOB_ID", job.job_id},
      {"HOOP_SECRET", job.secret},
      {"HOOP_RESTART_COUNT", std::to_string(job.restart_count)},
      // torchrun's, for torch.distributed's env:// initialisation.
      {"RANK", r},
      {"WORLD_SIZE", n},
      {"LOCAL_RANK", local_rank},
      {"LOCAL_WORLD_SIZE", local_size},
      {"GROUP_RANK", group_rank},
      {"GROUP_WORLD_SIZE", group_size},
      {"ROLE_RANK", r},
      {"ROLE_WORLD_SIZE", n},
      {"MASTER_ADDR", job.master_addr},
      {"MASTER_PORT", std::to_string(job.master_port)},
      {"TORCHELASTIC_RESTART_COUNT", std::to_string(job.restart_count)},
  };
  if (place) {
    // Ranks of one host share memory; the others are reached over TCP.
    const HostSpec& host = job.hosts.at(static_cast<size_t>(place->host));
    vars.emplace_back("HOOP_HOST_ID", host.name);
    if (!host.ifname.empty()) vars.emplace_back("HOOP_SOCKET_IFNAME", host.ifname);
  }
  // Like torchrun: N ranks each running as many OpenMP threads as there are cores would
  // oversubscribe the host many times over.
  if (job.nranks > 1 && !find_env(inherited, "OMP_NUM_THREADS"))
    vars.emplace_back("OMP_NUM_THREADS", "1");
  for (const auto& entry : job.extra) vars.push_back(entry);
  return vars;
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
  for (const auto& [name, value] : job_variables(job, rank, inherited)) vars[name] = value;

  std::vector<std::string> env;
  env.reserve(vars.size());
  for (const auto& [name, value] : vars) env.push_back(name + "=" + value);
  return env;
}

}  // namespace hoop::run
