// Runs the ranks of a test as real OS processes: fork() per rank, the body runs in the child,
// the parent collects exit statuses and what each rank reported. A separate store process
// serves the rendezvous, so that killing any rank leaves the store up.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "hoop/communicator.h"

namespace hoop::test {

struct RankContext {
  int rank = 0;
  int size = 0;
  uint16_t store_port = 0;
  std::string job_id;
  int report_fd = -1;

  // Sends one line to the parent (collected in RankResult::reports, in order).
  void report(const std::string& line) const;
  std::shared_ptr<Store> store() const;  // a new client of the test's store
  InitParams init_params() const;         // rank, size, store, job id
  // Communicator::create(init_params(), opts)
  std::shared_ptr<Communicator> make_comm(CommOptions opts = {}) const;
};

struct RankResult {
  int rank = 0;
  int exit_code = -1;   // -1 when killed by a signal
  int signal = 0;
  std::vector<std::string> reports;
  bool ok() const { return exit_code == 0; }
};

struct SpawnOptions {
  std::chrono::seconds timeout{180};  // the parent kills every rank after this
  // Environment set in the children before the body runs (e.g. {"HOOP_TRANSPORT", "tcp"}),
  // and in the store process before it serves.
  std::vector<std::pair<std::string, std::string>> env;
  // Called in the parent after all ranks started (e.g. to kill one): gets their pids.
  std::function<void(const std::vector<int>& pids)> on_started;
  // Once every rank has exited, remove what the job left in /dev/shm, as a launcher does. For
  // tests that kill or fail ranks on purpose; leak checks leave it off and look for themselves.
  bool remove_segments = false;
};

// Options of a job whose ranks fail on purpose: remove_segments set.
SpawnOptions launcher_cleanup();

// The body's exceptions and gtest failures make the child exit non-zero (the message goes to
// stderr); the parent returns every rank's result. Ranks left running at timeout are killed.
std::vector<RankResult> run_ranks(int n, const std::function<void(RankContext&)>& body,
                                  const SpawnOptions& opts = {});

// gtest helper: asserts every rank exited 0, printing the failures otherwise.
::testing::AssertionResult all_ok(const std::vector<RankResult>& results);

// A job id unique to this test process and call.
std::string unique_job_id();

// Names of /dev/shm entries of hoop jobs (for leak checks).
std::vector<std::string> hoop_shm_entries();
// Those of one job ("hoop-<job_id>-...").
std::vector<std::string> job_segments(const std::string& job_id);

double seconds_since(std::chrono::steady_clock::time_point t);
// Steady clock in nanoseconds: CLOCK_MONOTONIC is shared by every process of the machine, so
// ranks can compare instants.
int64_t now_ns();

}  // namespace hoop::test
