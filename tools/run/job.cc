#include "job.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>

#include <fmt/format.h>

#include "bootstrap/job_secret.h"
#include "core/errors.h"
#include "core/params.h"
#include "cpu_binding.h"
#include "hoop/store.h"
#include "output_forwarder.h"
#include "rank_env.h"
#include "rank_process.h"
#include "remote_launch.h"
#include "signal_channel.h"
#include "supervisor.h"
#include "transport/shm/shm_transport.h"
#include "unique_fd.h"

namespace hoop::run {

namespace {

std::string random_job_id() {
  std::random_device entropy;
  std::uniform_int_distribution<uint32_t> word;
  return fmt::format("{:08x}{:04x}", word(entropy), word(entropy) & 0xffff);
}

// A loopback port free right now, for MASTER_PORT (torch's store binds it in rank 0). The
// rendezvous store holds its own port, so the kernel cannot hand out that one.
uint16_t free_loopback_port() {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) throw_system_error(ErrorCode::init, "socket", errno);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    throw_system_error(ErrorCode::init, "cannot find a free port for MASTER_PORT", errno);
  return ntohs(addr.sin_port);
}

// Removes the job's shared-memory segments when the job ends, on every path out of run_job.
class ShmCleanup {
 public:
  explicit ShmCleanup(std::string job_id) : job_id_(std::move(job_id)) {}
  ~ShmCleanup() {
    try {
      transport::shm_remove_job_segments(job_id_);
    } catch (const std::exception& e) {
      write_all(STDERR_FILENO, fmt::format("hoop-run: removing the job's shared memory: {}\n", e.what()));
    }
  }
  ShmCleanup(const ShmCleanup&) = delete;
  ShmCleanup& operator=(const ShmCleanup&) = delete;

 private:
  std::string job_id_;
};

// The store of a job on several hosts listens where the ranks are told it is; when that address
// is not this machine's (hoop-run runs elsewhere, behind a NAT...), on every interface.
std::unique_ptr<TcpStoreServer> start_store(const StoreEndpoint& at, bool multi_host) {
  if (!multi_host) return std::make_unique<TcpStoreServer>("127.0.0.1", 0);
  try {
    return std::make_unique<TcpStoreServer>(at.advertised_host, at.port);
  } catch (const Error& e) {
    write_all(STDERR_FILENO, fmt::format("hoop-run: the store cannot bind {} ({}); listening on "
                                         "every interface\n", at.advertised_host, e.detail()));
    return std::make_unique<TcpStoreServer>("", at.port);
  }
}

std::string store_address_text(const std::string& host, uint16_t port) {
  return host.find(':') != std::string::npos ? fmt::format("[{}]:{}", host, port)
                                             : fmt::format("{}:{}", host, port);
}

bool any_rank_here(const JobEnvironment& job) {
  for (const auto& place : job.placement) {
    if (is_this_machine(job.hosts[static_cast<size_t>(place.host)].name)) return true;
  }
  return false;
}

std::string current_directory() {
  std::string dir(4096, '\0');
  if (::getcwd(dir.data(), dir.size()) == nullptr) return ".";
  dir.resize(std::strlen(dir.c_str()));
  return dir;
}

// A pipe whose reader gets `text`, then end of file: a remote shell's stdin carrying the secret.
// The text fits in the pipe's buffer, so nothing waits for the reader.
UniqueFd pipe_holding(const std::string& text) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw_system_error(ErrorCode::init, "pipe", errno);
  UniqueFd read_end(fds[0]);
  UniqueFd write_end(fds[1]);
  if (!write_all(write_end.get(), text)) {
    throw_system_error(ErrorCode::init, "writing the job's secret to a launcher's stdin", errno);
  }
  return read_end;
}

// A rank on another host starts through the launcher, whose stdin is `stdin_pipe` when it
// reads the secret there; ranks on this machine start as usual.
void launch_on_host(LaunchSpec& spec, const RunOptions& opts, const JobEnvironment& job, int rank,
                    const std::vector<std::string>& inherited, UniqueFd& stdin_pipe) {
  const HostSpec& host = job.hosts.at(static_cast<size_t>(job.placement.at(static_cast<size_t>(rank)).host));
  if (is_this_machine(host.name)) return;
  RemoteCommand remote = remote_command(opts.hosts.launcher, host.name, opts.command,
                                        job_variables(job, rank, inherited), current_directory());
  if (!remote.stdin_text.empty()) {
    stdin_pipe = pipe_holding(remote.stdin_text);
    spec.stdin_fd = stdin_pipe.get();
  }
  auto launcher = resolve_program(remote.argv.front(), find_env(spec.env, "PATH"));
  if (!launcher) {
    throw_error(ErrorCode::init, fmt::format("rank {}: launcher '{}' not found", rank,
                                             remote.argv.front()));
  }
  spec.program_path = *launcher;
  spec.argv = std::move(remote.argv);
}

}  // namespace

namespace {

// One attempt of the job: its own store (a fresh epoch: nothing of an earlier attempt is
// read back), its own job id, and its shared memory removed when it ends.
struct AttemptResult {
  int exit_code = 0;
  bool rank_failed = false;
};

AttemptResult run_attempt(const RunOptions& opts, SignalChannel& signals, const std::string& job_id,
                          const std::string& secret, int restart_count) {
  ShmCleanup cleanup(job_id);

  const bool multi_host = !opts.hosts.hosts.empty();
  const StoreEndpoint store_at = multi_host ? choose_store_endpoint(opts.hosts) : StoreEndpoint{"127.0.0.1", 0};
  std::unique_ptr<TcpStoreServer> store = start_store(store_at, multi_host);
  JobEnvironment job_env;
  job_env.nranks = opts.nranks;
  job_env.store_addr = store_address_text(store_at.advertised_host, store->port());
  if (multi_host) {
    job_env.hosts = opts.hosts.hosts;
    job_env.placement = place_ranks(opts.hosts.hosts, opts.nranks);
    job_env.master_addr = store_at.advertised_host;
  }
  job_env.job_id = job_id;
  job_env.secret = secret;
  job_env.master_port = opts.master_port ? *opts.master_port : free_loopback_port();
  job_env.restart_count = restart_count;
  job_env.extra = opts.extra_env;

  const std::vector<std::string> inherited = current_environment();
  // Looked up once, in the ranks' PATH, so that a missing program is one clear message.
  const std::vector<std::string> env0 = rank_environment(job_env, 0, inherited);
  std::optional<std::string> program = resolve_program(opts.command[0], find_env(env0, "PATH"));
  if (!program && multi_host && !any_rank_here(job_env)) program = opts.command[0];  // remote
  if (!program) {
    write_all(STDERR_FILENO,
              fmt::format("hoop-run: {}: program not found or not executable\n", opts.command[0]));
    return {127, false};
  }

  UniqueFd dev_null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!dev_null.valid()) throw_system_error(ErrorCode::internal, "open /dev/null", errno);

  std::vector<bool> here(static_cast<size_t>(opts.nranks), true);
  if (multi_host) {
    for (int r = 0; r < opts.nranks; ++r) {
      const int host = job_env.placement.at(static_cast<size_t>(r)).host;
      here[static_cast<size_t>(r)] = is_this_machine(job_env.hosts.at(static_cast<size_t>(host)).name);
    }
  }
  const std::vector<int> cpu_of_rank = plan_binding(opts.bind_to, here, allowed_cpus());

  // Each remote rank's stdin while it starts (read ends of pipes holding the secret).
  std::vector<UniqueFd> stdin_pipes(static_cast<size_t>(opts.nranks));

  SupervisorConfig config;
  config.nranks = opts.nranks;
  config.prefix_output = opts.prefix_output;
  config.grace_seconds = opts.grace_seconds;
  config.timeout_seconds = opts.timeout_seconds;
  config.survive = opts.survive;
  config.elastic = opts.elastic;
  Supervisor supervisor(config, signals);
  AttemptResult result;
  result.exit_code = supervisor.run([&](int rank) {
    LaunchSpec spec;
    spec.program_path = *program;
    spec.argv = opts.command;
    spec.env = rank_environment(job_env, rank, inherited);
    spec.child_sigmask = signals.original_mask();
    // Ranks never read the terminal: in their own process groups they would be stopped by
    // SIGTTIN, and N readers of one stdin make no sense.
    spec.stdin_fd = dev_null.get();
    if (multi_host) {
      launch_on_host(spec, opts, job_env, rank, inherited, stdin_pipes.at(static_cast<size_t>(rank)));
    }
    if (const int cpu = cpu_of_rank.at(static_cast<size_t>(rank)); cpu >= 0) {
      spec.bind = true;
      CPU_ZERO(&spec.cpus);
      CPU_SET(cpu, &spec.cpus);
    }
    return spec;
  });
  result.rank_failed = supervisor.ended_by_rank_failure();
  if (opts.store_stats) {
    const uint64_t requests = store->requests();
    write_all(STDERR_FILENO,
              fmt::format("hoop-run: store served {} requests ({:.2f} per rank) in {:.1f} ms of CPU\n", requests,
                          static_cast<double>(requests) / opts.nranks,
                          std::chrono::duration<double, std::milli>(store->busy_time()).count()));
  }
  return result;
}

// Secure by default: the job's HOOP_SECRET is -x HOOP_SECRET=S or --secret S, else the
// inherited HOOP_SECRET, else a random one, so that only the job's ranks pass each other's
// TCP handshakes and reach its store.
std::string job_secret(const RunOptions& opts) {
  std::string secret = opts.secret;
  for (const auto& [name, value] : opts.extra_env) {
    if (name == "HOOP_SECRET") secret = value;  // the ranks get it last: the store must agree
  }
  if (!secret.empty()) return secret;
  const auto inherited = params::text(params::Id::secret);
  return inherited ? *inherited : bootstrap::random_job_secret();
}

}  // namespace

int run_job(const RunOptions& opts) {
  // Before the store's thread exists, so that it inherits the blocked signals.
  SignalChannel signals;

  const std::string base_id = opts.job_id.empty() ? random_job_id() : opts.job_id;
  const std::string secret = job_secret(opts);
  // The store reads it too: it serves only clients that show it.
  ::setenv("HOOP_SECRET", secret.c_str(), 1);
  for (int attempt = 0;; ++attempt) {
    // Attempt k > 0 runs as job "<id>.r<k>": its segments and store keys never meet the
    // earlier attempts' (the '.' keeps the shm prefixes of the ids apart).
    const std::string job_id = attempt == 0 ? base_id : fmt::format("{}.r{}", base_id, attempt);
    const AttemptResult r = run_attempt(opts, signals, job_id, secret, attempt);
    // A signal to hoop-run or its --timeout ends the job; only a failed rank is retried.
    if (!r.rank_failed || attempt >= opts.max_restarts) {
      if (attempt > 0) {
        write_all(STDERR_FILENO, fmt::format("hoop-run: attempt {} of {} exited with code {}\n",
                                             attempt + 1, opts.max_restarts + 1, r.exit_code));
      }
      return r.exit_code;
    }
    write_all(STDERR_FILENO,
              fmt::format("hoop-run: restarting the job ({} of {} restarts; new job id {}.r{})\n",
                          attempt + 1, opts.max_restarts, base_id, attempt + 1));
  }
}

}  // namespace hoop::run
