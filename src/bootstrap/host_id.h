// Identity of the host this process runs on, for same-host detection: ranks with equal host
// ids share memory. hostname + kernel boot id + network namespace, so that network namespaces
// on one machine act as separate hosts; HOOP_HOST_ID overrides.
#pragma once

#include <string>

namespace hoop::bootstrap {

std::string host_id();
// The machine (kernel) this process runs on: hostname + boot id, whatever host it acts as.
// Ranks with equal machine ids compete for the same cores.
std::string machine_id();
std::string hostname();

}  // namespace hoop::bootstrap
