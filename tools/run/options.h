// Command line of hoop-run: `hoop-run -n N [options] -- program args...`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hosts.h"

namespace hoop::run {

struct RunOptions {
  int nranks = 0;
  std::vector<std::string> command;  // program and its arguments
  std::vector<std::pair<std::string, std::string>> extra_env;  // from -x NAME=VALUE, in order
  std::string job_id;                   // empty: a random one
  std::string secret;                   // --secret; empty: HOOP_SECRET if set, else a random one
  std::optional<uint16_t> master_port;  // empty: a free port
  bool prefix_output = true;
  bool store_stats = false;      // --store-stats: the store's requests and CPU time at the end
  double grace_seconds = 3.0;    // between SIGTERM and SIGKILL when stopping the ranks
  double timeout_seconds = 0.0;  // 0: no timeout
  int max_restarts = 0;  // restarts of the whole group after a rank fails (elastic restart)
  // --survive: a failed rank does not stop the others (they recover in memory: hoop-train
  // --redundancy 1); the job succeeds when every rank still running ends with 0.
  bool survive = false;
  // --elastic: as --survive, and a failed rank is started again (once per rank) with
  // HOOP_JOIN=1, to join the running group (hoop-train --redundancy 1 takes it back in).
  bool elastic = false;
  HostOptions hosts;             // --hosts / --hostfile: ranks on several hosts
  // --bind-to: "auto" (the same as "core") pins the ranks started on this machine round-robin
  // over hoop-run's CPUs, one each where they fit; "none" leaves them to the scheduler.
  std::string bind_to = "auto";
};

// What parse_run_options decided: run with `options`, or exit at once with `exit_code`
// (after --help, or a usage error already printed).
struct ParsedCommandLine {
  std::optional<RunOptions> options;
  int exit_code = 0;
};

ParsedCommandLine parse_run_options(int argc, char** argv);

}  // namespace hoop::run
