// The collective suites' shared fixture for AllReduce, ReduceScatter, AllGather, Broadcast and
// Reduce: cases (support/coll_job.h's CollCase, numbered), the runner that makes the call on a rank and checks it against the reference
// (support/reference.h), and the parent's checks of what the ranks reported: every rank went
// through all its cases, replicated outputs have the same bits on every rank, and nothing of
// the job is left in /dev/shm.
//
// In a rank:   CaseRunner runner(ctx, *comm, max_buffer_bytes(cases, n));  runner.run_all(cases);
// In the test: expect_cases_done_and_identical(cases, results);  expect_no_job_segments(results);
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "hoop/communicator.h"
#include "hoop/types.h"
#include "support/coll_job.h"
#include "support/spawn.h"

namespace hoop::test {

// Appends a case numbered by its position.
CollCase& add_case(std::vector<CollCase>& cases, OpType op, DataType dt, RedOp redop, int root,
                   size_t count, bool in_place, std::string algo = {});

// The largest input or output of the cases on n ranks, plus the guard the runner checks.
size_t max_buffer_bytes(const std::vector<CollCase>& cases, int n);

// How a rank checks that a forced algorithm is the one that ran.
enum class AlgoCheck {
  none,
  exact,             // last_algorithm() == algo
  exact_if_nonempty, // the same where count > 0 (an empty call may take no algorithm)
  schedule_name,     // last_algorithm() starts with the name of the schedule algo builds
};

struct RunnerOptions {
  // Above this many output elements a rank checks only its 1/N slice against the reference;
  // the comparison of hashes between ranks covers the rest.
  size_t full_check_limit = std::numeric_limits<size_t>::max();
  AlgoCheck algo_check = AlgoCheck::none;
  bool stop_at_first_failure = false;
  // The input and output buffers in registered memory (Communicator::alloc): zero copy where
  // every rank's are.
  bool registered = false;
};

class CaseRunner {
 public:
  CaseRunner(RankContext& ctx, Communicator& comm, size_t buffer_bytes, RunnerOptions opts = {});

  // Makes the call and checks it; a call that throws is recorded as a failure and rethrown.
  void run(const CollCase& c);
  // Every case, then the report "DONE" that the parent looks for.
  void run_all(const std::vector<CollCase>& cases);

 private:
  unsigned char* a() { return a_shared_ ? a_shared_.as<unsigned char>() : reinterpret_cast<unsigned char*>(a_.data()); }
  unsigned char* b() { return b_shared_ ? b_shared_.as<unsigned char>() : reinterpret_cast<unsigned char*>(b_.data()); }
  void run_case(const CollCase& c);
  void fill(const CollCase& c, unsigned char* p, uint64_t seed, size_t n);
  void fail(const CollCase& c, const std::string& what);
  void expect_empty(const CollCase& c, const std::string& problem, const std::string& what);
  void expect_guard(const CollCase& c, const unsigned char* p, const char* which);
  void expect_unchanged(const CollCase& c, const unsigned char* p, size_t bytes, uint64_t before,
                        const char* which);
  void check_reduced(const CollCase& c, const unsigned char* out, size_t first, size_t begin,
                     size_t end, uint64_t seed);
  void check_gathered(const CollCase& c, const unsigned char* out, size_t begin, size_t end,
                      uint64_t seed);
  void check_algorithm(const CollCase& c);
  void report_hash(const CollCase& c, const unsigned char* out, size_t bytes);
  std::pair<size_t, size_t> checked_slice(size_t total) const;

  RankContext& ctx_;
  Communicator& comm_;
  RunnerOptions opts_;
  int rank_;
  int n_;
  std::vector<uint64_t> a_, b_;
  SharedBuffer a_shared_, b_shared_;  // instead of a_ and b_ when registered
};

// The reference seed of a case on n ranks.
uint64_t case_seed(const CollCase& c, int n);

// Parent side: every rank reported DONE, and every replicated case has on each rank the hash
// rank 0 reported (a rank missing a hash of a case it went through is a failure too).
void expect_cases_done_and_identical(const std::vector<CollCase>& cases,
                                     const std::vector<RankResult>& results);

// The job id a rank reported ("JOB <id>"), or "".
std::string job_of(const std::vector<RankResult>& results);
// Nothing of the reported job is left in /dev/shm (whatever is, is then removed).
void expect_no_job_segments(const std::vector<RankResult>& results);

// A whole run: n ranks, each reporting its communicator's job and running every case with
// `ropts`; then the three checks above.
void run_cases_and_check(int n, const std::vector<CollCase>& cases, const RunnerOptions& ropts,
                         const SpawnOptions& opts);

}  // namespace hoop::test
