#include "supervisor.h"

#include <errno.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hoop/error.h"

namespace hoop::run {

namespace {

// How long output is still forwarded after the last rank ended, for descendants that left
// the rank's process group (so survived it) and keep its pipes open: they must not keep
// hoop-run alive.
constexpr milliseconds kDrainAfterLastExit{500};
constexpr size_t kReadChunk = 64 * 1024;
// How long after the first failed rank a rank killed from outside is still taken as the cause.
constexpr milliseconds kCauseWindow{1000};

void say(const std::string& message) { write_all(STDERR_FILENO, "hoop-run: " + message + "\n"); }

milliseconds from_seconds(double seconds) {
  return milliseconds(static_cast<int64_t>(std::llround(seconds * 1000.0)));
}

std::string format_seconds(double seconds) { return fmt::format("{:g} s", seconds); }

}  // namespace

Supervisor::Supervisor(SupervisorConfig config, SignalChannel& signals)
    : config_(config), signals_(signals) {}

Supervisor::~Supervisor() {
  for (auto& rank : ranks_) {
    if (!rank.process || !rank.process->running()) continue;
    rank.process->signal_group(SIGKILL);
    int status = 0;
    while (::waitpid(rank.process->pid(), &status, 0) < 0 && errno == EINTR) {
    }
  }
}

int Supervisor::run(const std::function<LaunchSpec(int rank)>& launch_spec) {
  if (config_.timeout_seconds > 0) timeout_at_ = Clock::now() + from_seconds(config_.timeout_seconds);
  launch_spec_ = launch_spec;
  replaced_.assign(static_cast<size_t>(config_.nranks), false);
  start_ranks(launch_spec);

  for (;;) {
    if (!any_running()) {
      if (!drain_until_) drain_until_ = Clock::now() + kDrainAfterLastExit;
      if (!any_pipe_open() || Clock::now() >= *drain_until_) break;
    }
    wait_for_events();
    check_deadlines();
  }
  for (auto& rank : ranks_) {
    rank.out.flush();
    rank.err.flush();
  }
  if (consequences_reported_) say("the job failed: " + cause_text_);
  if (!survived_.empty() && cause_ == Cause::none) {
    say(fmt::format("the job finished; {} rank(s) failed on the way: {}", survived_.size(),
                    fmt::join(survived_, "; ")));
  }
  return exit_code_;
}

void Supervisor::start_ranks(const std::function<LaunchSpec(int rank)>& launch_spec) {
  ranks_.reserve(static_cast<size_t>(config_.nranks));
  for (int r = 0; r < config_.nranks; ++r) {
    std::string prefix = config_.prefix_output ? fmt::format("[{}] ", r) : std::string();
    std::unique_ptr<RankProcess> process;
    try {
      process = std::make_unique<RankProcess>(r, launch_spec(r));
    } catch (const Error& e) {
      cause_ = Cause::launch_failed;
      exit_code_ = 126;
      cause_text_ = e.detail();
      say(cause_text_);
      stop_ranks(SIGTERM);
      return;
    }
    ranks_.push_back(Rank{std::move(process), LineForwarder(STDOUT_FILENO, prefix),
                          LineForwarder(STDERR_FILENO, prefix)});
  }
}

void Supervisor::wait_for_events() {
  std::vector<pollfd> fds;
  std::vector<std::pair<size_t, bool>> owners;  // (rank index, is stderr) of fds[1...]
  fds.push_back({signals_.fd(), POLLIN, 0});
  for (size_t i = 0; i < ranks_.size(); ++i) {
    if (ranks_[i].process->stdout_pipe().valid()) {
      fds.push_back({ranks_[i].process->stdout_pipe().get(), POLLIN, 0});
      owners.emplace_back(i, false);
    }
    if (ranks_[i].process->stderr_pipe().valid()) {
      fds.push_back({ranks_[i].process->stderr_pipe().get(), POLLIN, 0});
      owners.emplace_back(i, true);
    }
  }

  std::optional<TimePoint> next;
  for (const auto& deadline : {timeout_at_, kill_at_, drain_until_}) {
    if (deadline && (!next || *deadline < *next)) next = deadline;
  }
  int wait_ms = -1;
  if (next) {
    auto left = std::chrono::ceil<milliseconds>(*next - Clock::now()).count();
    wait_ms = static_cast<int>(std::clamp<int64_t>(left, 0, 60'000));
  }

  int ready = ::poll(fds.data(), fds.size(), wait_ms);
  if (ready <= 0) return;  // timed out (deadlines are checked next) or EINTR

  for (size_t i = 1; i < fds.size(); ++i) {
    if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    Rank& rank = ranks_[owners[i - 1].first];
    if (owners[i - 1].second)
      forward_output(rank.process->stderr_pipe(), rank.err, false);
    else
      forward_output(rank.process->stdout_pipe(), rank.out, false);
  }
  // Signals last: a rank's final output, read above, comes before the news of its exit.
  if (fds[0].revents & POLLIN) handle_signals();
}

void Supervisor::forward_output(UniqueFd& pipe, LineForwarder& to, bool all) {
  static char buffer[kReadChunk];
  // Even when draining, a bounded number of reads: a descendant of the rank may write forever.
  for (int reads = 0; pipe.valid() && reads < (all ? 64 : 1); ++reads) {
    ssize_t got = ::read(pipe.get(), buffer, sizeof buffer);
    if (got > 0) {
      to.feed(std::string_view(buffer, static_cast<size_t>(got)));
      continue;
    }
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    to.flush();  // end of stream (or a broken pipe): its partial last line goes out now
    pipe.reset();
  }
}

void Supervisor::handle_signals() {
  for (int sig : signals_.drain()) {
    if (sig == SIGCHLD) {
      reap_ranks();
      continue;
    }
    if (!any_running()) continue;  // the job is over already: nothing to stop
    if (cause_ == Cause::none) {
      cause_ = Cause::signal;
      exit_code_ = 128 + sig;
      cause_text_ = fmt::format("hoop-run received {}", signal_name(sig));
    }
    say(fmt::format("received {}, forwarding it to the ranks", signal_name(sig)));
    stop_ranks(sig);
  }
}

void Supervisor::reap_ranks() {
  for (auto& rank : ranks_) {
    if (rank.process->reap()) on_rank_exit(rank);
  }
}

void Supervisor::on_rank_exit(Rank& rank) {
  // What the rank wrote before it ended is printed before hoop-run speaks of its end.
  forward_output(rank.process->stdout_pipe(), rank.out, true);
  forward_output(rank.process->stderr_pipe(), rank.err, true);
  if (!rank.process->failed()) return;

  std::string what = rank.process->describe_exit();
  const int status = rank.process->wait_status();
  // Killed by a signal hoop-run did not send: from outside (kill -9, a crash).
  const bool killed_from_outside =
      WIFSIGNALED(status) && WTERMSIG(status) != stop_signal_ && !(WTERMSIG(status) == SIGKILL && sent_sigkill_);
  if (cause_ == Cause::rank_failed && !cause_is_signal_ && killed_from_outside && failed_at_ &&
      Clock::now() - *failed_at_ < kCauseWindow) {
    // A survivor notices a killed peer (its sockets close) and may exit before the kernel
    // reports the killed rank itself: the killed rank is the cause, the other a consequence.
    say(fmt::format("{}; the failure of {} just before was a consequence", what, cause_text_));
    exit_code_ = rank.process->exit_code();
    cause_text_ = what;
    cause_is_signal_ = true;
    consequences_reported_ = true;
    return;
  }
  if ((config_.survive || config_.elastic) && cause_ == Cause::none && any_running()) {
    // The others recover without it; whether they manage to is their own exit status.
    const int r = rank.process->rank();
    if (config_.elastic && !replaced_[static_cast<size_t>(r)]) {
      replaced_[static_cast<size_t>(r)] = true;
      LaunchSpec spec = launch_spec_(r);
      spec.env.push_back("HOOP_JOIN=1");
      try {
        rank.process = std::make_unique<RankProcess>(r, spec);
        say(fmt::format("{}; the other ranks go on, and a new process (pid {}) joins them in its place (--elastic)",
                        what, rank.process->pid()));
        survived_.push_back(what + ", replaced");
        return;
      } catch (const Error& e) {
        say(fmt::format("{}; starting its replacement failed: {}", what, e.detail()));
      }
    }
    say(what + "; the other ranks go on without it (--survive)");
    survived_.push_back(what);
    return;
  }
  if (cause_ != Cause::none) {
    say("consequence: " + what);
    consequences_reported_ = true;
    return;
  }
  cause_ = Cause::rank_failed;
  exit_code_ = rank.process->exit_code();
  cause_text_ = what;
  failed_at_ = Clock::now();
  cause_is_signal_ = WIFSIGNALED(status);
  say(what);
  if (any_running()) {
    say(fmt::format("stopping the other ranks (SIGTERM, then SIGKILL after {})",
                    format_seconds(config_.grace_seconds)));
    stop_ranks(SIGTERM);
  }
}

void Supervisor::check_deadlines() {
  const TimePoint now = Clock::now();
  if (timeout_at_ && now >= *timeout_at_) {
    timeout_at_.reset();
    if (cause_ == Cause::none && any_running()) {
      cause_ = Cause::timeout;
      exit_code_ = 124;
      cause_text_ = fmt::format("timeout after {}", format_seconds(config_.timeout_seconds));
      say(fmt::format("timeout after {}, still running: {}; stopping the job",
                      format_seconds(config_.timeout_seconds), running_ranks()));
      stop_ranks(SIGTERM);
    }
  }
  if (kill_at_ && now >= *kill_at_) {
    kill_at_.reset();
    if (any_running()) {
      say(fmt::format("still running {} after {}: {}; sending SIGKILL",
                      format_seconds(config_.grace_seconds), signal_name(stop_signal_),
                      running_ranks()));
      for (auto& rank : ranks_) rank.process->signal_group(SIGKILL);
      sent_sigkill_ = true;
    }
  }
}

void Supervisor::stop_ranks(int sig) {
  for (auto& rank : ranks_) rank.process->signal_group(sig);
  if (!kill_at_ && stop_signal_ == 0) {
    stop_signal_ = sig;
    kill_at_ = Clock::now() + from_seconds(config_.grace_seconds);
  }
  timeout_at_.reset();  // the job is ending already
}

bool Supervisor::any_running() const {
  return std::any_of(ranks_.begin(), ranks_.end(),
                     [](const Rank& r) { return r.process->running(); });
}

bool Supervisor::any_pipe_open() const {
  return std::any_of(ranks_.begin(), ranks_.end(), [](const Rank& r) {
    return r.process->stdout_pipe().valid() || r.process->stderr_pipe().valid();
  });
}

std::string Supervisor::running_ranks() const {
  std::string out;
  for (const auto& rank : ranks_) {
    if (!rank.process->running()) continue;
    if (!out.empty()) out += ", ";
    out += fmt::format("rank {} (pid {})", rank.process->rank(), rank.process->pid());
  }
  return out;
}

}  // namespace hoop::run
