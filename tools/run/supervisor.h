// The event loop of a job: starts the ranks, forwards their output, reaps them, forwards
// hoop-run's signals, and stops the job on the first failure or at the timeout.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/clock.h"
#include "output_forwarder.h"
#include "rank_process.h"
#include "signal_channel.h"

namespace hoop::run {

struct SupervisorConfig {
  int nranks = 0;
  bool prefix_output = true;
  double grace_seconds = 3.0;
  double timeout_seconds = 0.0;  // 0: none
  bool survive = false;          // a failed rank does not stop the others
  bool elastic = false;          // and is started again once, with HOOP_JOIN=1
};

class Supervisor {
 public:
  Supervisor(SupervisorConfig config, SignalChannel& signals);
  // Only on an error path are ranks still running here: they are killed and reaped, never
  // left behind.
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // Starts rank r with launch_spec(r) for every r, supervises the job until every rank has
  // ended and its output is forwarded, and returns hoop-run's exit code.
  int run(const std::function<LaunchSpec(int rank)>& launch_spec);
  // After run: whether the job ended because a rank failed (not a signal, timeout or launch
  // error), the case an elastic restart retries.
  bool ended_by_rank_failure() const { return cause_ == Cause::rank_failed; }

 private:
  enum class Cause { none, launch_failed, rank_failed, signal, timeout };

  struct Rank {
    std::unique_ptr<RankProcess> process;
    LineForwarder out;
    LineForwarder err;
  };

  void start_ranks(const std::function<LaunchSpec(int rank)>& launch_spec);
  void wait_for_events();
  void handle_signals();
  void reap_ranks();
  void on_rank_exit(Rank& rank);
  void check_deadlines();
  // Sends sig to every running rank and arms the deadline after which they get SIGKILL.
  void stop_ranks(int sig);
  // Forwards what is in the rank's pipe; drains it when `all` (else one read, to be fair).
  void forward_output(UniqueFd& pipe, LineForwarder& to, bool all);

  bool any_running() const;
  bool any_pipe_open() const;
  std::string running_ranks() const;  // "rank 1 (pid 7), rank 2 (pid 8)"

  SupervisorConfig config_;
  SignalChannel& signals_;
  std::vector<Rank> ranks_;
  Cause cause_ = Cause::none;
  int exit_code_ = 0;
  std::string cause_text_;
  bool consequences_reported_ = false;
  std::optional<TimePoint> timeout_at_;
  std::optional<TimePoint> kill_at_;   // SIGKILL for the ranks still running
  int stop_signal_ = 0;                // what was sent when the stop began
  bool sent_sigkill_ = false;
  std::optional<TimePoint> failed_at_;  // when the first failed rank was reaped
  bool cause_is_signal_ = false;        // the cause rank was killed by a signal
  std::optional<TimePoint> drain_until_;  // output of descendants that outlive their rank
  std::vector<std::string> survived_;     // --survive: the ranks that failed while the others went on
  std::function<LaunchSpec(int rank)> launch_spec_;
  std::vector<bool> replaced_;            // --elastic: ranks started again already
};

}  // namespace hoop::run
