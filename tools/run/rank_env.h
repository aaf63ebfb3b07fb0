// The environment each rank starts with: hoop-run's inherited environment, the variables that
// tell a rank who it is and where the rendezvous store is (hoop's and torchrun's, so that
// torch scripts run unchanged), then the user's -x NAME=VALUE.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hosts.h"

namespace hoop::run {

struct JobEnvironment {
  int nranks = 0;
  std::string store_addr;  // "127.0.0.1:<port>"
  std::string job_id;
  std::string secret;  // HOOP_SECRET of every rank
  uint16_t master_port = 0;
  int restart_count = 0;  // attempts before this one (hoop-run --max-restarts)
  std::vector<std::pair<std::string, std::string>> extra;  // applied last: the user wins
  // Ranks on several hosts (--hosts): each rank's host and local rank, HOOP_HOST_ID = the host's
  // name, HOOP_SOCKET_IFNAME = its ifname if given. Empty: every rank on this machine.
  std::vector<HostSpec> hosts;
  std::vector<RankPlacement> placement;
  std::string master_addr = "127.0.0.1";
};

// The variables hoop-run sets for rank `rank` (its own, torchrun's, OMP_NUM_THREADS unless
// inherited, the user's -x), in the order they are applied.
std::vector<std::pair<std::string, std::string>> job_variables(
    const JobEnvironment& job, int rank, const std::vector<std::string>& inherited);

// "NAME=VALUE" entries for rank `rank`, starting from `inherited` (a copy of environ).
std::vector<std::string> rank_environment(const JobEnvironment& job, int rank,
                                          const std::vector<std::string>& inherited);

// The value of NAME in a list of "NAME=VALUE" entries.
std::optional<std::string> find_env(const std::vector<std::string>& env, const std::string& name);

// A copy of this process's environment.
std::vector<std::string> current_environment();

}  // namespace hoop::run
