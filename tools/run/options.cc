#include "options.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstring>

namespace hoop::run {

namespace {

constexpr const char* kDescription =
    "hoop-run -n N [options] -- program args...\n"
    "hoop-run --hosts a:4,b:4 [--launcher 'ssh {host}'] [options] -- program args...\n"
    "Starts the ranks of one hoop job (on this machine, or on several hosts) and supervises them.";
constexpr const char* kFooter =
    "Each rank gets HOOP_RANK, HOOP_WORLD_SIZE, HOOP_LOCAL_RANK, HOOP_LOCAL_SIZE,\n"
    "HOOP_STORE_ADDR (the rendezvous store served by hoop-run) and HOOP_JOB_ID, plus torchrun's\n"
    "RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR and MASTER_PORT.\n"
    "HOOP_SECRET (required in every TCP handshake of the job and by its store) is --secret or\n"
    "-x HOOP_SECRET=S, else the inherited HOOP_SECRET, else 128 random bits drawn for the job;\n"
    "hoop-run never puts it on a rank's command line.\n"
    "Output lines are prefixed with the rank. SIGINT, SIGTERM and SIGHUP are forwarded to the\n"
    "ranks. When a rank fails the others get SIGTERM, then SIGKILL after --grace seconds, and\n"
    "hoop-run exits with the failed rank's code (128+signal when killed); 124 on --timeout.\n"
    "With --max-restarts K a failed group is started again (at most K times) under a new job\n"
    "id and store; the exit code is the last attempt's.\n"
    "Ranks started on this machine are pinned one per CPU, round-robin where they outnumber\n"
    "hoop-run's CPUs (--bind-to auto); --bind-to none leaves them unpinned.\n"
    "With --hosts or --hostfile ranks fill the hosts in order; each is started with the\n"
    "--launcher command (not for localhost) and gets HOOP_HOST_ID = its host's name (ranks of one\n"
    "host share memory, the others use TCP), HOOP_SOCKET_IFNAME = the host's ifname= if given,\n"
    "and the store's address: --store-addr, else the first host's addr= or resolved name.";

// Job ids name shared-memory segments ("hoop-<id>-..."), and the launcher removes every
// segment whose name starts with its job's prefix. A '-' in an id would let the prefix of
// job "a" match the segments of job "a-b", so ids are restricted to [A-Za-z0-9_.].
bool valid_job_id(const std::string& id) {
  if (id.empty() || id.size() > 64) return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '.';
  });
}

bool valid_env_name(const std::string& name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
}

}  // namespace

ParsedCommandLine parse_run_options(int argc, char** argv) {
  RunOptions opts;
  std::vector<std::string> exports;
  int master_port = 0;

  CLI::App app{kDescription, "hoop-run"};
  app.footer(kFooter);
  app.add_option("-n,--np", opts.nranks, "number of ranks to start (with --hosts: default all slots)")
      ->check(CLI::Range(1, 4096));
  app.add_option("-x,--export", exports, "add NAME=VALUE to the ranks' environment (repeatable)")
      ->allow_extra_args(false)
      ->each([](const std::string& item) {
        auto eq = item.find('=');
        if (eq == std::string::npos || !valid_env_name(item.substr(0, eq)))
          throw CLI::ValidationError("-x", "expected NAME=VALUE, got '" + item + "'");
      });
  app.add_option("--job-id", opts.job_id, "job id (letters, digits, '_', '.'; default: random)")
      ->check([](const std::string& id) {
        return valid_job_id(id) ? std::string()
                                : "a job id is 1-64 characters among letters, digits, '_' and '.'";
      });
  app.add_option("--secret", opts.secret,
                 "HOOP_SECRET of the job (default: the inherited HOOP_SECRET, else a random "
                 "one); visible in ps: prefer HOOP_SECRET in hoop-run's environment");
  app.add_option("--master-port", master_port, "MASTER_PORT given to the ranks (default: a free port)")
      ->check(CLI::Range(1, 65535));
  app.add_flag("--no-prefix", [&opts](int64_t) { opts.prefix_output = false; },
               "print the ranks' output without the \"[rank] \" prefix");
  app.add_flag("--store-stats", opts.store_stats,
               "at the end, print the requests the rendezvous store served (per rank too) and "
               "its CPU time");
  app.add_option("--grace", opts.grace_seconds,
                 "seconds between SIGTERM and SIGKILL when stopping the ranks")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--timeout", opts.timeout_seconds,
                 "stop the job and exit 124 after this many seconds (0: never)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--max-restarts", opts.max_restarts,
                 "after a rank fails, restart the whole group up to this many times (new job "
                 "id and store; the ranks get HOOP_RESTART_COUNT)")
      ->check(CLI::Range(0, 1000));
  app.add_flag("--survive", opts.survive,
               "a failed rank does not stop the others, which go on without it (hoop-train "
               "--redundancy 1); the job succeeds when every other rank ends with 0");
  app.add_flag("--elastic", opts.elastic,
               "as --survive, and a failed rank is started again (once per rank) with HOOP_JOIN=1 to "
               "join the running group, which takes it back in (hoop-train --redundancy 1)");
  app.add_option("--bind-to", opts.bind_to,
                 "pin each rank started here to one CPU: auto or core (round-robin over hoop-run's "
                 "CPUs, one each where they fit), none")
      ->check(CLI::IsMember({"auto", "core", "none"}))
      ->capture_default_str();
  HostArgs host_args;
  add_host_options(app, host_args);
  // Without "--", the first argument that is not an option of hoop-run starts the command.
  app.prefix_command();

  // Everything after the first "--" is the command, verbatim.
  std::vector<std::string> own_args;
  bool has_separator = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--") == 0) {
      has_separator = true;
      opts.command.assign(argv + i + 1, argv + argc);
      own_args.assign(argv + 1, argv + i);
      break;
    }
  }
  if (!has_separator) own_args.assign(argv + 1, argv + argc);
  std::reverse(own_args.begin(), own_args.end());  // CLI11 parses a reversed vector

  try {
    app.parse(own_args);
    auto rest = app.remaining();
    if (has_separator && !rest.empty())
      throw CLI::ExtrasError("hoop-run", rest);
    if (!has_separator) opts.command = std::move(rest);
    if (opts.command.empty())
      throw CLI::RequiredError("a program to run (hoop-run -n N -- program args...)");
    try {
      finish_host_options(host_args, opts.nranks, opts.hosts);
    } catch (const std::invalid_argument& e) {
      throw CLI::ValidationError(e.what());
    }
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return {std::nullopt, code == 0 ? 0 : 2};
  }

  for (const auto& item : exports) {
    auto eq = item.find('=');
    opts.extra_env.emplace_back(item.substr(0, eq), item.substr(eq + 1));
  }
  if (master_port != 0) opts.master_port = static_cast<uint16_t>(master_port);
  return {std::move(opts), 0};
}

}  // namespace hoop::run
