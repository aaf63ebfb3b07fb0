// Every collective x dtype x op x rank count x transport, against references computed in the
// ranks (support/reference.h). One job per (rank count, transport); the ranks loop over all
// cases. Replicated results (AllReduce, AllGather, Broadcast) are hashed per case and the
// parent checks that every rank got the same bits.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "hoop/communicator.h"
#include "hoop/error.h"
#include "hoop/types.h"
#include "support/reference.h"
#include "support/spawn.h"
#include "transport/shm/shm_transport.h"

namespace hoop::test {
namespace {

enum class Coll { allreduce, reducescatter, allgather, broadcast, reduce };

const char* name(Coll c) {
  switch (c) {
    case Coll::allreduce: return "allreduce";
    case Coll::reducescatter: return "reducescatter";
    case Coll::allgather: return "allgather";
    case Coll::broadcast: return "broadcast";
    case Coll::reduce: return "reduce";
  }
  return "?";
}

bool has_redop(Coll c) { return c != Coll::allgather && c != Coll::broadcast; }
bool has_root(Coll c) { return c == Coll::broadcast || c == Coll::reduce; }
// Every rank ends with the same output: the parent compares their hashes.
bool replicated(Coll c) {
  return c == Coll::allreduce || c == Coll::allgather || c == Coll::broadcast;
}

// A large prime count: chunks of every algorithm come out uneven.
constexpr size_t kBigCount = 1000003;
// Above this many output elements a rank checks only its 1/N slice against the reference (the
// hash comparison covers the rest); below it, everything.
constexpr size_t kFullCheckLimit = 1 << 16;
// Bytes after every output that nobody may write.
constexpr size_t kGuardBytes = 64;

struct Case {
  int id = 0;
  Coll coll = Coll::allreduce;
  DataType dt = DataType::f32;
  RedOp op = RedOp::sum;
  int root = 0;
  size_t count = 0;  // allreduce/broadcast/reduce: elements; reducescatter: recvcount;
                     // allgather: sendcount
  bool in_place = false;

  std::string describe() const {
    std::ostringstream os;
    os << "case " << id << ": " << name(coll) << " " << to_string(dt);
    if (has_redop(coll)) os << " " << to_string(op);
    if (has_root(coll)) os << " root " << root;
    os << " count " << count << (in_place ? " in-place" : " out-of-place");
    return os.str();
  }
  // Elements every rank contributes (reducescatter: its whole send buffer).
  size_t input_elems(int n) const { return coll == Coll::reducescatter ? count * n : count; }
  size_t output_elems(int n) const { return coll == Coll::allgather ? count * n : count; }
};

// The cases of a job of n ranks, identical in the parent and in every rank. Small counts get
// the full cross product; the big count runs on fewer combinations (time on 2 cores):
// every dtype with sum, f32, i32, f16 and bf16 with every op, a few dtypes for the data
// movers, and broadcast/reduce with one root each.
std::vector<Case> make_cases(int n) {
  std::vector<Case> cases;
  auto add = [&](Coll coll, DataType dt, RedOp op, int root, size_t count, bool in_place) {
    Case c;
    c.id = static_cast<int>(cases.size());
    c.coll = coll;
    c.dt = dt;
    c.op = op;
    c.root = root;
    c.count = count;
    c.in_place = in_place;
    cases.push_back(c);
  };
  const Coll all_colls[] = {Coll::allreduce, Coll::reducescatter, Coll::allgather,
                            Coll::broadcast, Coll::reduce};
  for (size_t count : {size_t{0}, size_t{1}, size_t{7}}) {
    for (Coll coll : all_colls) {
      for (DataType dt : kAllDataTypes) {
        for (RedOp op : kAllRedOps) {
          if (!has_redop(coll) && op != RedOp::sum) continue;
          for (int root = 0; root < (has_root(coll) ? n : 1); ++root) {
            for (bool in_place : {false, true}) add(coll, dt, op, root, count, in_place);
          }
        }
      }
    }
  }
  // Big counts. ReduceScatter and AllGather keep about kBigCount elements in total.
  const size_t big_per_rank = (kBigCount + n - 1) / n;
  int alternate = 0;
  for (Coll coll : all_colls) {
    const size_t count =
        (coll == Coll::reducescatter || coll == Coll::allgather) ? big_per_rank : kBigCount;
    for (DataType dt : kAllDataTypes) {
      for (RedOp op : kAllRedOps) {
        bool wanted;
        if (has_redop(coll)) {
          wanted = op == RedOp::sum || dt == DataType::f32 || dt == DataType::i32 ||
                   dt == DataType::f16 || dt == DataType::bf16;
        } else {
          wanted = op == RedOp::sum && (dt == DataType::f32 || dt == DataType::f64 ||
                                        dt == DataType::bf16 || dt == DataType::u8);
        }
        if (!wanted) continue;
        const int root = has_root(coll) ? (alternate % n) : 0;
        add(coll, dt, op, root, count, alternate % 2 == 1);
        ++alternate;
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
  return ref::mix64(static_cast<uint64_t>(c.id) * 1000003u + static_cast<uint64_t>(n));
}

// The slice [begin, end) of `total` output elements this rank checks against the reference.
std::pair<size_t, size_t> checked_slice(size_t total, int rank, int n) {
  if (total <= kFullCheckLimit) return {0, total};
  return {total * rank / n, total * (rank + 1) / n};
}

class CaseRunner {
 public:
  CaseRunner(RankContext& ctx, Communicator& comm, size_t buffer_bytes)
      : ctx_(ctx), comm_(comm), rank_(comm.rank()), n_(comm.size()) {
    // Allocated and touched once: fresh pages are slow to fault in on this machine.
    a_.assign(buffer_bytes / 8 + 1, 0);
    b_.assign(buffer_bytes / 8 + 1, 0);
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

  void expect_guard(const Case& c, const unsigned char* p, const char* which) {
    const size_t off = ref::first_non_sentinel(p, kGuardBytes);
    if (off != kGuardBytes) {
      fail(c, std::string("wrote past the end of ") + which + " (byte " + std::to_string(off) +
                  " after it)");
    }
  }

  void expect_unchanged(const Case& c, const unsigned char* p, size_t bytes, uint64_t before,
                        const char* which) {
    if (ref::hash_bytes(p, bytes) != before) fail(c, std::string(which) + " was modified");
  }

  void expect_empty(const Case& c, const std::string& problem, const char* what) {
    if (!problem.empty()) fail(c, std::string(what) + ": " + problem);
  }

  void report_hash(const Case& c, const unsigned char* out, size_t bytes) {
    char line[64];
    std::snprintf(line, sizeof line, "H %d %016llx", c.id,
                  static_cast<unsigned long long>(ref::hash_bytes(out, bytes)));
    ctx_.report(line);
  }

  // Checks the reduction of every rank's input over output elements [begin, end) of `out`,
  // whose element 0 corresponds to input index `first`.
  void check_reduced(const Case& c, const unsigned char* out, size_t first, size_t begin,
                     size_t end, uint64_t seed) {
    const size_t es = dtype_size(c.dt);
    expect_empty(c,
                 ref::check_reduction(out + begin * es, c.dt, c.op, seed, n_, first + begin,
                                      end - begin),
                 "wrong result");
  }

  // Checks an AllGather output: block r holds rank r's count inputs. Positions [begin, end).
  void check_gathered(const Case& c, const unsigned char* out, size_t begin, size_t end,
                      uint64_t seed) {
    const size_t es = dtype_size(c.dt);
    for (int r = 0; r < n_ && c.count > 0; ++r) {
      const size_t lo = std::max(begin, r * c.count);
      const size_t hi = std::min(end, (r + 1) * c.count);
      if (lo >= hi) continue;
      expect_empty(c,
                   ref::check_inputs(out + lo * es, c.dt, c.op, seed, r, lo - r * c.count, hi - lo),
                   ("wrong block of rank " + std::to_string(r)).c_str());
    }
  }

  void run_case(const Case& c) {
    const size_t es = dtype_size(c.dt);
    const uint64_t seed = case_seed(c, n_);
    const size_t in_bytes = c.input_elems(n_) * es;
    const size_t out_bytes = c.output_elems(n_) * es;
    unsigned char* send = a();
    unsigned char* recv = b();
    switch (c.coll) {
      case Coll::allreduce: {
        if (c.in_place) {
          ref::fill_inputs(recv, c.dt, c.op, seed, rank_, 0, c.count);
          ref::fill_sentinel(recv + out_bytes, kGuardBytes);
          comm_.allreduce(recv, recv, c.count, c.dt, c.op);
        } else {
          ref::fill_inputs(send, c.dt, c.op, seed, rank_, 0, c.count);
          ref::fill_sentinel(recv, out_bytes + kGuardBytes);
          const uint64_t before = ref::hash_bytes(send, in_bytes);
          comm_.allreduce(send, recv, c.count, c.dt, c.op);
          expect_unchanged(c, send, in_bytes, before, "the send buffer");
        }
        expect_guard(c, recv + out_bytes, "recv");
        auto [lo, hi] = checked_slice(c.count, rank_, n_);
        check_reduced(c, recv, 0, lo, hi, seed);
        report_hash(c, recv, out_bytes);
        break;
      }
      case Coll::reducescatter: {
        unsigned char* out;
        if (c.in_place) {
          ref::fill_inputs(recv, c.dt, c.op, seed, rank_, 0, c.count * n_);
          ref::fill_sentinel(recv + in_bytes, kGuardBytes);
          out = recv + rank_ * c.count * es;
          comm_.reducescatter(recv, out, c.count, c.dt, c.op);
          expect_guard(c, recv + in_bytes, "the buffer");
        } else {
          ref::fill_inputs(send, c.dt, c.op, seed, rank_, 0, c.count * n_);
          ref::fill_sentinel(recv, out_bytes + kGuardBytes);
          const uint64_t before = ref::hash_bytes(send, in_bytes);
          out = recv;
          comm_.reducescatter(send, recv, c.count, c.dt, c.op);
          expect_unchanged(c, send, in_bytes, before, "the send buffer");
          expect_guard(c, recv + out_bytes, "recv");
        }
        check_reduced(c, out, rank_ * c.count, 0, c.count, seed);
        break;
      }
      case Coll::allgather: {
        ref::fill_sentinel(recv, out_bytes + kGuardBytes);
        if (c.in_place) {
          unsigned char* mine = recv + rank_ * c.count * es;
          ref::fill_inputs(mine, c.dt, c.op, seed, rank_, 0, c.count);
          comm_.allgather(mine, recv, c.count, c.dt);
        } else {
          ref::fill_inputs(send, c.dt, c.op, seed, rank_, 0, c.count);
          const uint64_t before = ref::hash_bytes(send, in_bytes);
          comm_.allgather(send, recv, c.count, c.dt);
          expect_unchanged(c, send, in_bytes, before, "the send buffer");
        }
        expect_guard(c, recv + out_bytes, "recv");
        auto [lo, hi] = checked_slice(c.count * n_, rank_, n_);
        check_gathered(c, recv, lo, hi, seed);
        report_hash(c, recv, out_bytes);
        break;
      }
      case Coll::broadcast: {
        if (c.in_place) {
          if (rank_ == c.root) {
            ref::fill_inputs(recv, c.dt, c.op, seed, rank_, 0, c.count);
          } else {
            ref::fill_sentinel(recv, out_bytes);
          }
          ref::fill_sentinel(recv + out_bytes, kGuardBytes);
          comm_.broadcast(recv, recv, c.count, c.dt, c.root);
        } else {
          // Non-roots pass a send buffer too: it must be neither read into recv nor written.
          ref::fill_inputs(send, c.dt, c.op, seed, rank_, 0, c.count);
          ref::fill_sentinel(recv, out_bytes + kGuardBytes);
          const uint64_t before = ref::hash_bytes(send, in_bytes);
          comm_.broadcast(send, recv, c.count, c.dt, c.root);
          expect_unchanged(c, send, in_bytes, before, "the send buffer");
        }
        expect_guard(c, recv + out_bytes, "recv");
        auto [lo, hi] = checked_slice(c.count, rank_, n_);
        expect_empty(c, ref::check_inputs(recv + lo * es, c.dt, c.op, seed, c.root, lo, hi - lo),
                     "wrong data");
        report_hash(c, recv, out_bytes);
        break;
      }
      case Coll::reduce: {
        if (c.in_place) {
          ref::fill_inputs(recv, c.dt, c.op, seed, rank_, 0, c.count);
          ref::fill_sentinel(recv + out_bytes, kGuardBytes);
          const uint64_t before = ref::hash_bytes(recv, out_bytes);
          comm_.reduce(recv, recv, c.count, c.dt, c.op, c.root);
          if (rank_ == c.root) {
            check_reduced(c, recv, 0, 0, c.count, seed);
          } else {
            expect_unchanged(c, recv, out_bytes, before, "the buffer of a non-root");
          }
          expect_guard(c, recv + out_bytes, "the buffer");
        } else {
          ref::fill_inputs(send, c.dt, c.op, seed, rank_, 0, c.count);
          ref::fill_sentinel(recv, out_bytes + kGuardBytes);
          const uint64_t before = ref::hash_bytes(send, in_bytes);
          comm_.reduce(send, recv, c.count, c.dt, c.op, c.root);
          expect_unchanged(c, send, in_bytes, before, "the send buffer");
          if (rank_ == c.root) {
            check_reduced(c, recv, 0, 0, c.count, seed);
            expect_guard(c, recv + out_bytes, "recv");
          } else {
            const size_t off = ref::first_non_sentinel(recv, out_bytes + kGuardBytes);
            if (off != out_bytes + kGuardBytes) {
              fail(c, "recv of a non-root was written (byte " + std::to_string(off) + ")");
            }
          }
        }
        break;
      }
    }
  }

  RankContext& ctx_;
  Communicator& comm_;
  int rank_;
  int n_;
  std::vector<uint64_t> a_, b_;
};

struct JobParam {
  int nranks;
  const char* transport;  // "shm": the default (auto, one host); "tcp": forced
};

std::string param_name(const ::testing::TestParamInfo<JobParam>& info) {
  return std::string(info.param.transport) + "_n" + std::to_string(info.param.nranks);
}

class CollectivesTest : public ::testing::TestWithParam<JobParam> {};

TEST_P(CollectivesTest, EveryCollectiveDtypeOpAndCount) {
  const int n = GetParam().nranks;
  const std::string transport = GetParam().transport;
  const std::vector<Case> cases = make_cases(n);

  SpawnOptions opts;
  opts.timeout = std::chrono::seconds(240);
  if (transport == "tcp") opts.env.emplace_back("HOOP_TRANSPORT", "tcp");

  const auto start = std::chrono::steady_clock::now();
  auto results = run_ranks(n, [&](RankContext& ctx) {
    CommOptions copts;
    copts.timeout = std::chrono::seconds(60);
    auto comm = ctx.make_comm(copts);
    ctx.report("JOB " + comm->job_id());
    ASSERT_EQ(comm->rank(), ctx.rank);
    ASSERT_EQ(comm->size(), n);
    CaseRunner runner(ctx, *comm, max_buffer_bytes(cases, n));
    for (const Case& c : cases) runner.run(c);
    // Every link ran over the transport asked for.
    for (const LinkStats& link : comm->stats().links) {
      EXPECT_EQ(link.transport, transport) << "link to peer " << link.peer;
    }
    ctx.report("DONE " + std::to_string(cases.size()));
  }, opts);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "[ timing ] " << cases.size() << " cases on " << n << " ranks over " << transport
            << ": " << seconds << " s\n";

  EXPECT_TRUE(all_ok(results));
  // Replicated outputs: every rank reported the same hash for every such case.
  std::vector<std::map<int, std::string>> hashes(n);
  for (const RankResult& r : results) {
    bool done = false;
    for (const std::string& line : r.reports) {
      if (line.rfind("H ", 0) == 0) {
        std::istringstream is(line.substr(2));
        int id;
        std::string h;
        is >> id >> h;
        hashes[r.rank][id] = h;
      } else if (line.rfind("DONE ", 0) == 0) {
        done = true;
      }
    }
    EXPECT_TRUE(done) << "rank " << r.rank << " did not finish its cases";
  }
  int differing = 0;
  for (const Case& c : cases) {
    if (!replicated(c.coll)) continue;
    for (int r = 0; r < n; ++r) {
      auto it = hashes[r].find(c.id);
      auto it0 = hashes[0].find(c.id);
      if (it == hashes[r].end() || it0 == hashes[0].end()) continue;  // failed earlier
      if (it->second != it0->second && differing++ < 20) {
        ADD_FAILURE() << c.describe() << ": rank " << r << " got other bits than rank 0";
      }
    }
  }
  EXPECT_EQ(differing, 0) << "cases whose outputs differ between ranks";

  // Nothing of the job left in /dev/shm.
  std::string job;
  for (const std::string& line : results[0].reports) {
    if (line.rfind("JOB ", 0) == 0) job = line.substr(4);
  }
  ASSERT_FALSE(job.empty());
  std::vector<std::string> left;
  for (const std::string& e : hoop_shm_entries()) {
    if (e.rfind("hoop-" + job + "-", 0) == 0) left.push_back(e);
  }
  EXPECT_EQ(left, std::vector<std::string>{});
  transport::shm_remove_job_segments(job);
}

INSTANTIATE_TEST_SUITE_P(Collectives, CollectivesTest,
                         ::testing::Values(JobParam{1, "shm"}, JobParam{2, "shm"},
                                           JobParam{3, "shm"}, JobParam{4, "shm"},
                                           JobParam{5, "shm"}, JobParam{8, "shm"},
                                           JobParam{1, "tcp"}, JobParam{2, "tcp"},
                                           JobParam{3, "tcp"}, JobParam{4, "tcp"},
                                           JobParam{5, "tcp"}, JobParam{8, "tcp"}),
                         param_name);

}  // namespace
}  // namespace hoop::test
