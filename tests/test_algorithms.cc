// Every registered algorithm of every collective, forced per call (OpOptions::algo), on real
// processes over shared memory and TCP: int32 sums exact on all five collectives, f32 sums and
// averages against the rank-order reference and bit-identical on every rank, f16/bf16 through
// the f32 reduction path, odd sizes (0, 1, primes, non-multiples of N, several pipeline
// chunks), in place and out of place, every root on small jobs. The algorithm list comes from
// schedule::algorithms_for, so algorithms registered later are covered without editing this
// file. One job per (rank count, transport); the ranks loop over all cases.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "hoop/communicator.h"
#include "hoop/types.h"
#include "schedule/schedule.h"
#include "support/reference.h"
#include "support/spawn.h"
#include "transport/shm/shm_transport.h"

namespace hoop::test {
namespace {

constexpr OpType kOps[] = {OpType::allreduce, OpType::reducescatter, OpType::allgather,
                           OpType::broadcast, OpType::reduce};
// Over three tree chunks, and prime: every split comes out uneven.
constexpr size_t kBigCount = 98317;
constexpr size_t kGuardBytes = 64;

bool has_root(OpType op) { return op == OpType::broadcast || op == OpType::reduce; }
bool reduces(OpType op) {
  return op == OpType::allreduce || op == OpType::reducescatter || op == OpType::reduce;
}
bool replicated(OpType op) {
  return op == OpType::allreduce || op == OpType::allgather || op == OpType::broadcast;
}

struct Case {
  int id = 0;
  OpType op = OpType::allreduce;
  std::string algo;
  DataType dt = DataType::i32;
  RedOp redop = RedOp::sum;
  int root = 0;
  size_t count = 0;  // reducescatter: recvcount; allgather: sendcount
  bool in_place = false;

  std::string describe() const {
    std::ostringstream os;
    os << "case " << id << ": " << to_string(op) << " algo " << algo << " " << to_string(dt);
    if (reduces(op)) os << " " << to_string(redop);
    if (has_root(op)) os << " root " << root;
    os << " count " << count << (in_place ? " in-place" : " out-of-place");
    return os.str();
  }
  size_t input_elems(int n) const { return op == OpType::reducescatter ? count * n : count; }
  size_t output_elems(int n) const { return op == OpType::allgather ? count * n : count; }
};

std::vector<Case> make_cases(int n) {
  std::vector<Case> cases;
  for (OpType op : kOps) {
    for (const std::string& algo : schedule::algorithms_for(op)) {
      auto add = [&](DataType dt, RedOp redop, int root, size_t count, bool in_place) {
        Case c;
        c.id = static_cast<int>(cases.size());
        c.op = op;
        c.algo = algo;
        c.dt = dt;
        c.redop = redop;
        c.root = root % n;
        c.count = count;
        c.in_place = in_place;
        cases.push_back(c);
      };
      const bool per_rank = op == OpType::reducescatter || op == OpType::allgather;
      const size_t big = per_rank ? (kBigCount + n - 1) / n : kBigCount;
      const size_t uneven = static_cast<size_t>(7 * n + 3);  // not a multiple of n (n > 1)
      // int32 sums, exact: small odd sizes with every root, then larger ones.
      for (size_t count : {size_t{0}, size_t{1}, size_t{13}}) {
        for (bool in_place : {false, true}) {
          for (int root = 0; root < (has_root(op) && n <= 5 ? n : 1); ++root) {
            add(DataType::i32, RedOp::sum, has_root(op) && n > 5 ? n - 1 : root, count, in_place);
          }
        }
      }
      add(DataType::i32, RedOp::sum, 1, uneven, false);
      add(DataType::i32, RedOp::sum, 2, big, true);
      // f32: the parent compares every rank's bits; the ranks compare with the reference.
      add(DataType::f32, RedOp::sum, 0, big, false);
      add(DataType::f32, RedOp::sum, n - 1, uneven, true);
      if (reduces(op)) {
        add(DataType::f32, RedOp::avg, 1, uneven, false);
        add(DataType::f32, RedOp::max, 0, 13, true);
        add(DataType::f16, RedOp::sum, 0, uneven, false);
        add(DataType::bf16, RedOp::sum, n / 2, 1001, true);
        add(DataType::bf16, RedOp::avg, 1, 13, false);
      }
    }
  }
  return cases;
}

size_t max_buffer_bytes(const std::vector<Case>& cases, int n) {
  size_t bytes = 0;
  for (const Case& c : cases) {
    const size_t es = dtype_size(c.dt);
    bytes = std::max({bytes, c.input_elems(n) * es, c.output_elems(n) * es});
  }
  return bytes + kGuardBytes;
}

uint64_t case_seed(const Case& c, int n) {
  return ref::mix64(static_cast<uint64_t>(c.id) * 7919u + static_cast<uint64_t>(n) * 104729u);
}

class Runner {
 public:
  Runner(RankContext& ctx, Communicator& comm, size_t bytes)
      : ctx_(ctx), comm_(comm), rank_(comm.rank()), n_(comm.size()) {
    a_.assign(bytes / 8 + 1, 0);
    b_.assign(bytes / 8 + 1, 0);
  }

  void run(const Case& c) {
    try {
      run_case(c);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "rank " << rank_ << ", " << c.describe() << ": threw " << e.what();
      throw;
    }
  }

 private:
  unsigned char* a() { return reinterpret_cast<unsigned char*>(a_.data()); }
  unsigned char* b() { return reinterpret_cast<unsigned char*>(b_.data()); }

  void fail(const Case& c, const std::string& what) {
    ADD_FAILURE() << "rank " << rank_ << " of " << n_ << ", " << c.describe() << ": " << what;
  }
  void expect_empty(const Case& c, const std::string& problem, const std::string& what) {
    if (!problem.empty()) fail(c, what + ": " + problem);
  }
  void expect_guard(const Case& c, const unsigned char* p) {
    if (ref::first_non_sentinel(p, kGuardBytes) != kGuardBytes) fail(c, "wrote past the end of the output");
  }
  void expect_unchanged(const Case& c, const unsigned char* p, size_t bytes, uint64_t before) {
    if (ref::hash_bytes(p, bytes) != before) fail(c, "the input buffer was modified");
  }

  // The algorithm that ran is the one asked for (its schedule's name).
  void expect_algorithm(const Case& c) {
    schedule::CollectiveDesc d;
    d.op = c.op;
    d.count = c.count;
    d.nranks = n_;
    d.root = c.root;
    d.redop = c.redop;
    d.in_place = c.in_place;
    const std::string want = schedule::build(c.algo, d, rank_).algorithm;
    const std::string ran = comm_.last_algorithm();
    if (ran.rfind(want, 0) != 0) fail(c, "ran algorithm '" + ran + "', expected '" + want + "'");
  }

  void report_hash(const Case& c, const unsigned char* out, size_t bytes) {
    char line[64];
    std::snprintf(line, sizeof line, "H %d %016llx", c.id,
                  static_cast<unsigned long long>(ref::hash_bytes(out, bytes)));
    ctx_.report(line);
  }

  void run_case(const Case& c) {
    const size_t es = dtype_size(c.dt);
    const uint64_t seed = case_seed(c, n_);
    const size_t in_bytes = c.input_elems(n_) * es, out_bytes = c.output_elems(n_) * es;
    OpOptions o;
    o.algo = c.algo;
    unsigned char* send = a();
    unsigned char* recv = b();
    uint64_t before = 0;
    // Out of place: inputs in `send`, sentinel in `recv`. In place: per NCCL's conventions.
    auto prepare_out_of_place = [&](size_t in_elems) {
      ref::fill_inputs(send, c.dt, c.redop, seed, rank_, 0, in_elems);
      ref::fill_sentinel(recv, out_bytes + kGuardBytes);
      before = ref::hash_bytes(send, in_bytes);
    };
    switch (c.op) {
      case OpType::allreduce: {
        if (c.in_place) {
          ref::fill_inputs(recv, c.dt, c.redop, seed, rank_, 0, c.count);
          ref::fill_sentinel(recv + out_bytes, kGuardBytes);
          comm_.allreduce(recv, recv, c.count, c.dt, c.redop, o);
        } else {
          prepare_out_of_place(c.count);
          comm_.allreduce(send, recv, c.count, c.dt, c.redop, o);
          expect_unchanged(c, send, in_bytes, before);
        }
        expect_guard(c, recv + out_bytes);
        expect_empty(c, ref::check_reduction(recv, c.dt, c.redop, seed, n_, 0, c.count), "wrong result");
        report_hash(c, recv, out_bytes);
        break;
      }
      case OpType::reducescatter: {
        unsigned char* out = recv;
        if (c.in_place) {
          ref::fill_inputs(recv, c.dt, c.redop, seed, rank_, 0, c.count * n_);
          ref::fill_sentinel(recv + in_bytes, kGuardBytes);
          out = recv + rank_ * c.count * es;
          comm_.reducescatter(recv, out, c.count, c.dt, c.redop, o);
          expect_guard(c, recv + in_bytes);
        } else {
          prepare_out_of_place(c.count * n_);
          comm_.reducescatter(send, recv, c.count, c.dt, c.redop, o);
          expect_unchanged(c, send, in_bytes, before);
          expect_guard(c, recv + out_bytes);
        }
        expect_empty(c, ref::check_reduction(out, c.dt, c.redop, seed, n_, rank_ * c.count, c.count),
                     "wrong result");
        break;
      }
      case OpType::allgather: {
        if (c.in_place) {
          ref::fill_sentinel(recv, out_bytes + kGuardBytes);
          unsigned char* mine = recv + rank_ * c.count * es;
          ref::fill_inputs(mine, c.dt, c.redop, seed, rank_, 0, c.count);
          comm_.allgather(mine, recv, c.count, c.dt, o);
        } else {
          prepare_out_of_place(c.count);
          comm_.allgather(send, recv, c.count, c.dt, o);
          expect_unchanged(c, send, in_bytes, before);
        }
        expect_guard(c, recv + out_bytes);
        for (int r = 0; r < n_; ++r) {
          expect_empty(c, ref::check_inputs(recv + r * c.count * es, c.dt, c.redop, seed, r, 0, c.count),
                       "wrong block of rank " + std::to_string(r));
        }
        report_hash(c, recv, out_bytes);
        break;
      }
      case OpType::broadcast: {
        if (c.in_place) {
          if (rank_ == c.root) ref::fill_inputs(recv, c.dt, c.redop, seed, rank_, 0, c.count);
          else ref::fill_sentinel(recv, out_bytes);
          ref::fill_sentinel(recv + out_bytes, kGuardBytes);
          comm_.broadcast(recv, recv, c.count, c.dt, c.root, o);
        } else {
          prepare_out_of_place(c.count);
          comm_.broadcast(send, recv, c.count, c.dt, c.root, o);
          expect_unchanged(c, send, in_bytes, before);
        }
        expect_guard(c, recv + out_bytes);
        expect_empty(c, ref::check_inputs(recv, c.dt, c.redop, seed, c.root, 0, c.count), "wrong data");
        report_hash(c, recv, out_bytes);
        break;
      }
      case OpType::reduce: {
        if (c.in_place) {
          ref::fill_inputs(recv, c.dt, c.redop, seed, rank_, 0, c.count);
          ref::fill_sentinel(recv + out_bytes, kGuardBytes);
          before = ref::hash_bytes(recv, out_bytes);
          comm_.reduce(recv, recv, c.count, c.dt, c.redop, c.root, o);
          if (rank_ != c.root) expect_unchanged(c, recv, out_bytes, before);
        } else {
          prepare_out_of_place(c.count);
          comm_.reduce(send, recv, c.count, c.dt, c.redop, c.root, o);
          expect_unchanged(c, send, in_bytes, before);
          if (rank_ != c.root && ref::first_non_sentinel(recv, out_bytes) != out_bytes) {
            fail(c, "a non-root's recv buffer was written");
          }
        }
        expect_guard(c, recv + out_bytes);
        if (rank_ == c.root) {
          expect_empty(c, ref::check_reduction(recv, c.dt, c.redop, seed, n_, 0, c.count), "wrong result");
        }
        break;
      }
      default: break;
    }
    expect_algorithm(c);
  }

  RankContext& ctx_;
  Communicator& comm_;
  int rank_;
  int n_;
  std::vector<uint64_t> a_, b_;
};

struct JobParam {
  int nranks;
  const char* transport;
};

std::string param_name(const ::testing::TestParamInfo<JobParam>& info) {
  return std::string(info.param.transport) + "_n" + std::to_string(info.param.nranks);
}

class AlgorithmsTest : public ::testing::TestWithParam<JobParam> {};

TEST_P(AlgorithmsTest, EveryAlgorithmOfEveryCollective) {
  const int n = GetParam().nranks;
  const std::string transport = GetParam().transport;
  const std::vector<Case> cases = make_cases(n);

  SpawnOptions opts;
  opts.timeout = std::chrono::seconds(240);
  opts.env.emplace_back("HOOP_TRANSPORT", transport);

  const auto start = std::chrono::steady_clock::now();
  auto results = run_ranks(n, [&](RankContext& ctx) {
    CommOptions copts;
    copts.timeout = std::chrono::seconds(60);
    auto comm = ctx.make_comm(copts);
    ctx.report("JOB " + comm->job_id());
    Runner runner(ctx, *comm, max_buffer_bytes(cases, n));
    for (const Case& c : cases) runner.run(c);
    for (const LinkStats& link : comm->stats().links) {
      EXPECT_EQ(link.transport, transport) << "link to peer " << link.peer;
    }
    ctx.report("DONE");
  }, opts);
  std::cout << "[ timing ] " << cases.size() << " cases on " << n << " ranks over " << transport
            << ": " << seconds_since(start) << " s\n";

  EXPECT_TRUE(all_ok(results));
  std::vector<std::map<int, std::string>> hashes(static_cast<size_t>(n));
  std::string job;
  for (const RankResult& r : results) {
    bool done = false;
    for (const std::string& line : r.reports) {
      if (line.rfind("H ", 0) == 0) {
        std::istringstream is(line.substr(2));
        int id;
        std::string h;
        is >> id >> h;
        hashes[static_cast<size_t>(r.rank)][id] = h;
      } else if (line == "DONE") {
        done = true;
      } else if (line.rfind("JOB ", 0) == 0) {
        job = line.substr(4);
      }
    }
    EXPECT_TRUE(done) << "rank " << r.rank << " did not finish its cases";
  }
  // Replicated outputs (floats too): every rank holds the same bits.
  int differing = 0;
  for (const Case& c : cases) {
    if (!replicated(c.op)) continue;
    const auto it0 = hashes[0].find(c.id);
    for (int r = 1; r < n && it0 != hashes[0].end(); ++r) {
      const auto it = hashes[static_cast<size_t>(r)].find(c.id);
      if (it != hashes[static_cast<size_t>(r)].end() && it->second != it0->second && differing++ < 20) {
        ADD_FAILURE() << c.describe() << ": rank " << r << " got other bits than rank 0";
      }
    }
  }
  EXPECT_EQ(differing, 0);
  if (!job.empty()) transport::shm_remove_job_segments(job);
}

INSTANTIATE_TEST_SUITE_P(Algorithms, AlgorithmsTest,
                         ::testing::Values(JobParam{1, "shm"}, JobParam{2, "shm"}, JobParam{3, "shm"},
                                           JobParam{5, "shm"}, JobParam{8, "shm"}, JobParam{2, "tcp"},
                                           JobParam{3, "tcp"}, JobParam{5, "tcp"}, JobParam{8, "tcp"}),
                         param_name);

}  // namespace
}  // namespace hoop::test
