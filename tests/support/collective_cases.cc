#include "support/collective_cases.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <sstream>
#include <type_traits>

#include "schedule/schedule.h"
#include "support/reference.h"
#include "transport/shm/shm_transport.h"

namespace hoop::test {

namespace {

// Inputs where op(a, b) and op(b, a) differ in bits: NaNs with a payload per rank, zeros of a
// sign per rank, and ordinary values.
template <class T>
void fill_special(T* p, size_t n, int rank) {
  using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  for (size_t i = 0; i < n; ++i) {
    switch (i % 5) {
      case 0: {  // a NaN on every rank, payloads differ
        Bits b = __builtin_bit_cast(Bits, std::numeric_limits<T>::quiet_NaN()) | Bits(rank + 1);
        p[i] = __builtin_bit_cast(T, b);
        break;
      }
      case 1: p[i] = (rank + i) % 2 ? T(-0.0) : T(0.0); break;
      case 2: p[i] = static_cast<size_t>(rank) == i % 7 ? std::numeric_limits<T>::quiet_NaN() : T(1.5); break;
      default: p[i] = T(1) + T(rank) / T(8) + T(i % 3); break;
    }
  }
}

}  // namespace

CollCase& add_case(std::vector<CollCase>& cases, OpType op, DataType dt, RedOp redop, int root,
                   size_t count, bool in_place, std::string algo) {
  CollCase c;
  c.id = static_cast<int>(cases.size());
  c.op = op;
  c.algo = std::move(algo);
  c.dt = dt;
  c.redop = redop;
  c.root = root;
  c.count = count;
  c.in_place = in_place;
  cases.push_back(std::move(c));
  return cases.back();
}

size_t max_buffer_bytes(const std::vector<CollCase>& cases, int n) {
  size_t bytes = 0;
  for (const CollCase& c : cases) {
    const size_t es = dtype_size(c.dt);
    bytes = std::max({bytes, c.input_elems(n) * es, c.output_elems(n) * es});
  }
  return bytes + kGuardBytes;
}

uint64_t case_seed(const CollCase& c, int n) {
  return ref::mix64(static_cast<uint64_t>(c.id) * 7919u + static_cast<uint64_t>(n) * 104729u);
}

// ---------------------------------------------------------------------------------------------
// In a rank

CaseRunner::CaseRunner(RankContext& ctx, Communicator& comm, size_t buffer_bytes, RunnerOptions opts)
    : ctx_(ctx), comm_(comm), opts_(opts), rank_(comm.rank()), n_(comm.size()) {
  // Allocated and touched once: fresh pages are slow to fault in on this machine.
  const size_t words = buffer_bytes / 8 + 1;
  if (opts_.registered) {
    a_shared_ = comm.alloc(words * 8);
    b_shared_ = comm.alloc(words * 8);
  } else {
    a_.assign(words, 0);
    b_.assign(words, 0);
  }
}

void CaseRunner::run(const CollCase& c) {
  try {
    run_case(c);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "rank " << rank_ << ", case " << c.id << ": " << c.describe() << ": threw " << e.what();
    throw;
  }
}

void CaseRunner::run_all(const std::vector<CollCase>& cases) {
  for (const CollCase& c : cases) {
    run(c);
    if (opts_.stop_at_first_failure && ::testing::Test::HasFailure()) return;
  }
  ctx_.report("DONE");
}

void CaseRunner::fail(const CollCase& c, const std::string& what) {
  ADD_FAILURE() << "rank " << rank_ << " of " << n_ << ", case " << c.id << ": " << c.describe() << ": " << what;
}

void CaseRunner::expect_empty(const CollCase& c, const std::string& problem, const std::string& what) {
  if (!problem.empty()) fail(c, what + ": " + problem);
}

void CaseRunner::expect_guard(const CollCase& c, const unsigned char* p, const char* which) {
  const size_t off = ref::first_non_sentinel(p, kGuardBytes);
  if (off != kGuardBytes) {
    fail(c, std::string("wrote past the end of ") + which + " (byte " + std::to_string(off) + " after it)");
  }
}

void CaseRunner::expect_unchanged(const CollCase& c, const unsigned char* p, size_t bytes, uint64_t before,
                                  const char* which) {
  if (ref::hash_bytes(p, bytes) != before) fail(c, std::string(which) + " was modified");
}

void CaseRunner::fill(const CollCase& c, unsigned char* p, uint64_t seed, size_t n) {
  if (!c.special) return ref::fill_inputs(p, c.dt, c.redop, seed, rank_, 0, n);
  if (c.dt == DataType::f32) fill_special(reinterpret_cast<float*>(p), n, rank_);
  else if (c.dt == DataType::f64) fill_special(reinterpret_cast<double*>(p), n, rank_);
  else fail(c, "special values need f32 or f64");
}

std::pair<size_t, size_t> CaseRunner::checked_slice(size_t total) const {
  if (total <= opts_.full_check_limit) return {0, total};
  return {total * rank_ / n_, total * (rank_ + 1) / n_};
}

// The reduction of every rank's input over output elements [begin, end) of `out`, whose
// element 0 corresponds to input index `first`. Special values are checked by their bits only.
void CaseRunner::check_reduced(const CollCase& c, const unsigned char* out, size_t first, size_t begin,
                               size_t end, uint64_t seed) {
  if (c.special) return;
  const size_t es = dtype_size(c.dt);
  expect_empty(c, ref::check_reduction(out + begin * es, c.dt, c.redop, seed, n_, first + begin, end - begin),
               "wrong result");
}

// An AllGather output: block r holds rank r's count inputs. Positions [begin, end).
void CaseRunner::check_gathered(const CollCase& c, const unsigned char* out, size_t begin, size_t end,
                                uint64_t seed) {
  const size_t es = dtype_size(c.dt);
  for (int r = 0; r < n_ && c.count > 0; ++r) {
    const size_t lo = std::max(begin, r * c.count);
    const size_t hi = std::min(end, (r + 1) * c.count);
    if (lo >= hi) continue;
    expect_empty(c, ref::check_inputs(out + lo * es, c.dt, c.redop, seed, r, lo - r * c.count, hi - lo),
                 "wrong block of rank " + std::to_string(r));
  }
}

void CaseRunner::check_algorithm(const CollCase& c) {
  const std::string ran = comm_.last_algorithm();
  switch (opts_.algo_check) {
    case AlgoCheck::none: return;
    case AlgoCheck::exact_if_nonempty:
      if (c.count == 0) return;
      [[fallthrough]];
    case AlgoCheck::exact:
      if (ran != c.algo) fail(c, "ran algorithm '" + ran + "', expected '" + c.algo + "'");
      return;
    case AlgoCheck::schedule_name: {
      schedule::CollectiveDesc d;
      d.op = c.op;
      d.count = c.count;
      d.nranks = n_;
      d.root = c.root;
      d.redop = c.redop;
      d.in_place = c.in_place;
      const std::string want = schedule::build(c.algo, d, rank_).algorithm;
      if (ran.rfind(want, 0) != 0) fail(c, "ran algorithm '" + ran + "', expected '" + want + "'");
      return;
    }
  }
}

void CaseRunner::report_hash(const CollCase& c, const unsigned char* out, size_t bytes) {
  char line[64];
  std::snprintf(line, sizeof line, "H %d %016llx", c.id, static_cast<unsigned long long>(ref::hash_bytes(out, bytes)));
  ctx_.report(line);
}

void CaseRunner::run_case(const CollCase& c) {
  const size_t es = dtype_size(c.dt);
  const uint64_t seed = case_seed(c, n_);
  const size_t in_bytes = c.input_elems(n_) * es;
  const size_t out_bytes = c.output_elems(n_) * es;
  OpOptions o;
  o.algo = c.algo;
  unsigned char* send = a();
  unsigned char* recv = b();
  uint64_t before = 0;
  // Out of place: inputs in `send` (which must stay as it was), sentinel in `recv`.
  auto prepare_out_of_place = [&](size_t in_elems) {
    fill(c, send, seed, in_elems);
    ref::fill_sentinel(recv, out_bytes + kGuardBytes);
    before = ref::hash_bytes(send, in_bytes);
  };
  switch (c.op) {
    case OpType::allreduce: {
      if (c.in_place) {
        fill(c, recv, seed, c.count);
        ref::fill_sentinel(recv + out_bytes, kGuardBytes);
        comm_.allreduce(recv, recv, c.count, c.dt, c.redop, o);
      } else {
        prepare_out_of_place(c.count);
        comm_.allreduce(send, recv, c.count, c.dt, c.redop, o);
        expect_unchanged(c, send, in_bytes, before, "the send buffer");
      }
      expect_guard(c, recv + out_bytes, "recv");
      auto [lo, hi] = checked_slice(c.count);
      check_reduced(c, recv, 0, lo, hi, seed);
      report_hash(c, recv, out_bytes);
      break;
    }
    case OpType::reducescatter: {
      unsigned char* out = recv;
      if (c.in_place) {
        fill(c, recv, seed, c.count * n_);
        ref::fill_sentinel(recv + in_bytes, kGuardBytes);
        out = recv + rank_ * c.count * es;
        comm_.reducescatter(recv, out, c.count, c.dt, c.redop, o);
        expect_guard(c, recv + in_bytes, "the buffer");
      } else {
        prepare_out_of_place(c.count * n_);
        comm_.reducescatter(send, recv, c.count, c.dt, c.redop, o);
        expect_unchanged(c, send, in_bytes, before, "the send buffer");
        expect_guard(c, recv + out_bytes, "recv");
      }
      check_reduced(c, out, rank_ * c.count, 0, c.count, seed);
      break;
    }
    case OpType::allgather: {
      if (c.in_place) {
        ref::fill_sentinel(recv, out_bytes + kGuardBytes);
        unsigned char* mine = recv + rank_ * c.count * es;
        fill(c, mine, seed, c.count);
        comm_.allgather(mine, recv, c.count, c.dt, o);
      } else {
        prepare_out_of_place(c.count);
        comm_.allgather(send, recv, c.count, c.dt, o);
        expect_unchanged(c, send, in_bytes, before, "the send buffer");
      }
      expect_guard(c, recv + out_bytes, "recv");
      auto [lo, hi] = checked_slice(c.count * n_);
      check_gathered(c, recv, lo, hi, seed);
      report_hash(c, recv, out_bytes);
      break;
    }
    case OpType::broadcast: {
      if (c.in_place) {
        if (rank_ == c.root) fill(c, recv, seed, c.count);
        else ref::fill_sentinel(recv, out_bytes);
        ref::fill_sentinel(recv + out_bytes, kGuardBytes);
        comm_.broadcast(recv, recv, c.count, c.dt, c.root, o);
      } else {
        // Non-roots pass a send buffer too: it must be neither read into recv nor written.
        prepare_out_of_place(c.count);
        comm_.broadcast(send, recv, c.count, c.dt, c.root, o);
        expect_unchanged(c, send, in_bytes, before, "the send buffer");
      }
      expect_guard(c, recv + out_bytes, "recv");
      auto [lo, hi] = checked_slice(c.count);
      expect_empty(c, ref::check_inputs(recv + lo * es, c.dt, c.redop, seed, c.root, lo, hi - lo), "wrong data");
      report_hash(c, recv, out_bytes);
      break;
    }
    case OpType::reduce: {
      if (c.in_place) {
        fill(c, recv, seed, c.count);
        ref::fill_sentinel(recv + out_bytes, kGuardBytes);
        before = ref::hash_bytes(recv, out_bytes);
        comm_.reduce(recv, recv, c.count, c.dt, c.redop, c.root, o);
        if (rank_ == c.root) check_reduced(c, recv, 0, 0, c.count, seed);
        else expect_unchanged(c, recv, out_bytes, before, "the buffer of a non-root");
        expect_guard(c, recv + out_bytes, "the buffer");
      } else {
        prepare_out_of_place(c.count);
        comm_.reduce(send, recv, c.count, c.dt, c.redop, c.root, o);
        expect_unchanged(c, send, in_bytes, before, "the send buffer");
        if (rank_ == c.root) {
          check_reduced(c, recv, 0, 0, c.count, seed);
          expect_guard(c, recv + out_bytes, "recv");
        } else {
          const size_t off = ref::first_non_sentinel(recv, out_bytes + kGuardBytes);
          if (off != out_bytes + kGuardBytes) fail(c, "recv of a non-root was written (byte " + std::to_string(off) + ")");
        }
      }
      break;
    }
    default: fail(c, "not a collective of this fixture"); return;
  }
  check_algorithm(c);
}

// ---------------------------------------------------------------------------------------------
// In the parent

void expect_cases_done_and_identical(const std::vector<CollCase>& cases, const std::vector<RankResult>& results) {
  std::vector<std::map<int, std::string>> hashes(results.size());
  for (size_t i = 0; i < results.size(); ++i) {
    bool done = false;
    for (const std::string& line : results[i].reports) {
      if (line == "DONE") done = true;
      if (line.rfind("H ", 0) != 0) continue;
      std::istringstream is(line.substr(2));
      int id = -1;
      std::string h;
      is >> id >> h;
      hashes[i][id] = h;
    }
    EXPECT_TRUE(done) << "rank " << results[i].rank << " did not finish its cases";
  }
  int differing = 0;
  size_t compared = 0;
  for (const CollCase& c : cases) {
    if (!c.replicated() || hashes.empty()) continue;
    const auto first = hashes[0].find(c.id);
    for (size_t i = 1; i < hashes.size(); ++i) {
      const auto it = hashes[i].find(c.id);
      const bool missing = first == hashes[0].end() || it == hashes[i].end();
      ++compared;
      if ((missing || it->second != first->second) && differing++ < 20) {
        ADD_FAILURE() << "case " << c.id << ": " << c.describe() << ": rank " << results[i].rank
                      << (missing ? " or rank 0 reported no hash" : " got other bits than rank 0");
      }
    }
  }
  EXPECT_EQ(differing, 0) << "cases whose outputs differ between ranks (of " << compared << " compared)";
}

std::string job_of(const std::vector<RankResult>& results) {
  for (const auto& r : results)
    for (const auto& line : r.reports)
      if (line.rfind("JOB ", 0) == 0) return line.substr(4);
  return "";
}

void expect_no_job_segments(const std::vector<RankResult>& results) {
  const std::string job = job_of(results);
  ASSERT_FALSE(job.empty()) << "no rank reported its job id";
  EXPECT_EQ(job_segments(job), std::vector<std::string>{}) << "left in /dev/shm by job " << job;
  transport::shm_remove_job_segments(job);
}

void run_cases_and_check(int n, const std::vector<CollCase>& cases, const RunnerOptions& ropts,
                         const SpawnOptions& opts) {
  auto results = run_ranks(n, [&](RankContext& ctx) {
    auto comm = ctx.make_comm();
    ctx.report("JOB " + comm->job_id());
    CaseRunner runner(ctx, *comm, max_buffer_bytes(cases, n), ropts);
    runner.run_all(cases);
  }, opts);
  EXPECT_TRUE(all_ok(results));
  expect_cases_done_and_identical(cases, results);
  expect_no_job_segments(results);
}

}  // namespace hoop::test
