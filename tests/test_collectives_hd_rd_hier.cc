// halving-doubling, recursive-doubling and hierarchical over real processes (forced with
// OpOptions::algo): exact integer sums, float results against the reference, odd sizes,
// in place and out of place, and bit-identical replicated results, including inputs where
// the float kernels are not commutative (NaNs with different payloads, -0.0 against +0.0).
// Hierarchical runs on fake hosts (HOOP_HOST_ID per rank): ranks of one fake host talk over
// shared memory, ranks of different ones over TCP. One job per rank count or topology.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "hoop/communicator.h"
#include "hoop/error.h"
#include "hoop/types.h"
#include "schedule/schedule.h"
#include "support/reference.h"
#include "support/spawn.h"

namespace hoop::test {
namespace {

struct AlgoCase {
  int id = 0;
  OpType op = OpType::allreduce;
  std::string algo;
  DataType dt = DataType::f32;
  RedOp redop = RedOp::sum;
  size_t count = 0;  // allreduce: elements; reducescatter: recvcount; allgather: sendcount
  bool in_place = false;
  bool special = false;  // float inputs with NaNs and signed zeros: only bit identity checked

  std::string describe() const {
    std::ostringstream os;
    os << "case " << id << ": " << algo << " " << to_string(op) << " " << to_string(dt) << " "
       << to_string(redop) << " count " << count << (in_place ? " in-place" : "")
       << (special ? " special values" : "");
    return os.str();
  }
  size_t in_elems(int n) const { return op == OpType::reducescatter ? count * n : count; }
  size_t out_elems(int n) const { return op == OpType::allgather ? count * n : count; }
};

const size_t kSizes[] = {0, 1, 2, 7, 13, 1009, 20011};

std::vector<AlgoCase> make_cases(bool hierarchical_only) {
  std::vector<AlgoCase> cases;
  auto add = [&](OpType op, const char* algo, DataType dt, RedOp redop, size_t count, bool in_place,
                 bool special = false) {
    AlgoCase c;
    c.id = static_cast<int>(cases.size());
    c.op = op;
    c.algo = algo;
    c.dt = dt;
    c.redop = redop;
    c.count = count;
    c.in_place = in_place;
    c.special = special;
    cases.push_back(c);
  };
  const std::pair<DataType, RedOp> reducing[] = {
      {DataType::i32, RedOp::sum}, {DataType::f32, RedOp::sum}, {DataType::f32, RedOp::avg},
      {DataType::f32, RedOp::min}, {DataType::f64, RedOp::max}, {DataType::f32, RedOp::prod},
      {DataType::bf16, RedOp::sum}};
  std::vector<const char*> allreduce_algos = {"hierarchical"};
  if (!hierarchical_only) allreduce_algos = {"halving-doubling", "recursive-doubling", "hierarchical"};
  for (const char* algo : allreduce_algos) {
    for (size_t count : kSizes) {
      for (bool in_place : {false, true}) {
        for (auto [dt, redop] : reducing) add(OpType::allreduce, algo, dt, redop, count, in_place);
      }
    }
    for (RedOp redop : {RedOp::sum, RedOp::prod, RedOp::min, RedOp::max}) {
      add(OpType::allreduce, algo, DataType::f32, redop, 257, false, true);
      add(OpType::allreduce, algo, DataType::f64, redop, 31, true, true);
    }
  }
  if (hierarchical_only) return cases;
  for (size_t count : kSizes) {
    for (bool in_place : {false, true}) {
      for (auto [dt, redop] : reducing) {
        add(OpType::reducescatter, "halving-doubling", dt, redop, count / 4 + (count > 0), in_place);
      }
      for (const char* algo : {"halving-doubling", "recursive-doubling"}) {
        for (DataType dt : {DataType::i32, DataType::f64, DataType::u8}) {
          add(OpType::allgather, algo, dt, RedOp::sum, count / 4 + (count > 0), in_place);
        }
      }
    }
  }
  return cases;
}

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

class Runner {
 public:
  Runner(RankContext& ctx, Communicator& comm) : ctx_(ctx), comm_(comm), rank_(comm.rank()), n_(comm.size()) {}

  void run(const AlgoCase& c) {
    const size_t es = dtype_size(c.dt);
    const uint64_t seed = ref::mix64(static_cast<uint64_t>(c.id) * 7919u + static_cast<uint64_t>(n_));
    const size_t in_bytes = c.in_elems(n_) * es, out_bytes = c.out_elems(n_) * es;
    std::vector<unsigned char> a(std::max(in_bytes, out_bytes) + 64), b(std::max(in_bytes, out_bytes) + 64);
    OpOptions o;
    o.algo = c.algo;
    auto fill = [&](unsigned char* p, size_t first, size_t n) {
      if (!c.special) return ref::fill_inputs(p, c.dt, c.redop, seed, rank_, first, n);
      if (c.dt == DataType::f32) fill_special(reinterpret_cast<float*>(p), n, rank_);
      else fill_special(reinterpret_cast<double*>(p), n, rank_);
    };
    unsigned char* send = a.data();
    unsigned char* recv = b.data();
    unsigned char* out = recv;
    switch (c.op) {
      case OpType::allreduce:
        if (c.in_place) send = recv;
        fill(send, 0, c.count);
        comm_.allreduce(send, recv, c.count, c.dt, c.redop, o);
        if (!c.special) check(c, ref::check_reduction(recv, c.dt, c.redop, seed, n_, 0, c.count));
        break;
      case OpType::reducescatter:
        if (c.in_place) {
          send = recv;
          out = recv + rank_ * c.count * es;
        }
        fill(send, 0, c.count * n_);
        comm_.reducescatter(send, out, c.count, c.dt, c.redop, o);
        check(c, ref::check_reduction(out, c.dt, c.redop, seed, n_, rank_ * c.count, c.count));
        break;
      case OpType::allgather:
        if (c.in_place) send = recv + rank_ * c.count * es;
        fill(send, 0, c.count);
        comm_.allgather(send, recv, c.count, c.dt, o);
        for (int r = 0; r < n_; ++r) {
          check(c, ref::check_inputs(recv + r * c.count * es, c.dt, c.redop, seed, r, 0, c.count));
        }
        break;
      case OpType::broadcast:  // root 1 % n
        if (c.in_place) send = recv;
        if (rank_ == 1 % n_) fill(send, 0, c.count);
        comm_.broadcast(send, recv, c.count, c.dt, 1 % n_, o);
        check(c, ref::check_inputs(recv, c.dt, c.redop, seed, 1 % n_, 0, c.count));
        break;
      case OpType::reduce:  // root n - 1
        if (c.in_place) send = recv;
        fill(send, 0, c.count);
        comm_.reduce(send, recv, c.count, c.dt, c.redop, n_ - 1, o);
        if (rank_ == n_ - 1) check(c, ref::check_reduction(recv, c.dt, c.redop, seed, n_, 0, c.count));
        break;
      default: FAIL();
    }
    if (c.count > 0 && comm_.last_algorithm() != c.algo) {
      check(c, "ran " + comm_.last_algorithm() + " instead of " + c.algo);
    }
    if (c.op != OpType::reducescatter && c.op != OpType::reduce) {
      char line[64];
      std::snprintf(line, sizeof line, "H %d %016llx", c.id,
                    static_cast<unsigned long long>(ref::hash_bytes(out, c.out_elems(n_) * es)));
      ctx_.report(line);
    }
  }

 private:
  void check(const AlgoCase& c, const std::string& problem) {
    if (!problem.empty()) ADD_FAILURE() << "rank " << rank_ << " of " << n_ << ", " << c.describe() << ": " << problem;
  }

  RankContext& ctx_;
  Communicator& comm_;
  int rank_, n_;
};

// Runs the cases on n ranks; host_of(rank) >= 0 gives fake hosts. Checks that every rank
// finished and that replicated outputs have the same bits on every rank.
void run_job(int n, const std::vector<AlgoCase>& cases, const std::function<int(int)>& host_of,
             const std::vector<std::pair<std::string, std::string>>& env = {}) {
  SpawnOptions opts;
  opts.timeout = std::chrono::seconds(120);
  opts.env = env;
  auto results = run_ranks(n, [&](RankContext& ctx) {
    const int host = host_of(ctx.rank);
    if (host >= 0) ::setenv("HOOP_HOST_ID", ("fake-host-" + std::to_string(host)).c_str(), 1);
    CommOptions copts;
    copts.timeout = std::chrono::seconds(60);
    auto comm = ctx.make_comm(copts);
    Runner runner(ctx, *comm);
    for (const AlgoCase& c : cases) {
      runner.run(c);
      if (::testing::Test::HasFailure()) break;
    }
    if (host >= 0) {
      // Fake hosts took effect: same host over shared memory, others over TCP, and the
      // communicator handed the hosts to the schedule: it connected exactly to the peers the
      // hierarchical schedule of that topology names.
      std::vector<std::string> ids;
      for (int r = 0; r < n; ++r) ids.push_back(std::to_string(host_of(r)));
      const schedule::Topology topo = schedule::Topology::from_host_ids(ids);
      schedule::CollectiveDesc d;
      d.nranks = n;
      d.count = kSizes[std::size(kSizes) - 1];
      d.topology = &topo;
      std::set<int> expected, connected;
      for (const auto& step : schedule::build("hierarchical", d, ctx.rank).steps) {
        for (const auto& a : step.actions) {
          if (a.peer >= 0) expected.insert(a.peer);
        }
      }
      for (const LinkStats& link : comm->stats().links) {
        EXPECT_EQ(link.transport, host_of(link.peer) == host ? "shm" : "tcp") << "link to " << link.peer;
        connected.insert(link.peer);
      }
      EXPECT_EQ(connected, expected);
    }
    ctx.report("DONE");
  }, opts);
  ASSERT_TRUE(all_ok(results));
  std::vector<std::map<int, std::string>> hashes(static_cast<size_t>(n));
  for (const RankResult& r : results) {
    bool done = false;
    for (const std::string& line : r.reports) {
      if (line == "DONE") done = true;
      if (line.rfind("H ", 0) != 0) continue;
      std::istringstream is(line.substr(2));
      int id;
      std::string h;
      is >> id >> h;
      hashes[static_cast<size_t>(r.rank)][id] = h;
    }
    EXPECT_TRUE(done) << "rank " << r.rank;
  }
  for (const AlgoCase& c : cases) {
    if (c.op == OpType::reducescatter || c.op == OpType::reduce) continue;
    for (int r = 1; r < n; ++r) {
      EXPECT_EQ(hashes[static_cast<size_t>(r)][c.id], hashes[0][c.id])
          << c.describe() << ": rank " << r << " got other bits than rank 0";
    }
  }
}

class HdRdHierTest : public ::testing::TestWithParam<int> {};

TEST_P(HdRdHierTest, OneHost) {
  run_job(GetParam(), make_cases(false), [](int) { return -1; });
}

INSTANTIATE_TEST_SUITE_P(Ranks, HdRdHierTest, ::testing::Values(1, 2, 3, 4, 5, 6, 8),
                         [](const ::testing::TestParamInfo<int>& p) { return "n" + std::to_string(p.param); });

// The ring algorithms cut into HOOP_NCHANNELS parts, each on its own links, over both
// transports; sizes below, at and above the per-channel minimum (kMinElementsPerChannel).
std::vector<AlgoCase> make_channel_cases() {
  std::vector<AlgoCase> cases;
  auto add = [&](OpType op, DataType dt, RedOp redop, size_t count, bool in_place) {
    AlgoCase c;
    c.id = static_cast<int>(cases.size());
    c.op = op;
    c.algo = "ring";
    c.dt = dt;
    c.redop = redop;
    c.count = count;
    c.in_place = in_place;
    cases.push_back(c);
  };
  for (size_t count : {size_t{5}, size_t{3 * 4096 + 7}, size_t{50021}}) {
    for (bool in_place : {false, true}) {
      add(OpType::allreduce, DataType::i32, RedOp::sum, count, in_place);
      add(OpType::allreduce, DataType::f32, RedOp::avg, count, in_place);
      add(OpType::reducescatter, DataType::f32, RedOp::sum, count, in_place);
      add(OpType::allgather, DataType::i32, RedOp::sum, count, in_place);
      add(OpType::broadcast, DataType::f64, RedOp::sum, count, in_place);
      add(OpType::reduce, DataType::i32, RedOp::max, count, in_place);
    }
  }
  return cases;
}

class MultiChannelRingTest : public ::testing::TestWithParam<const char*> {};

TEST_P(MultiChannelRingTest, EveryRingCollective) {
  std::vector<std::pair<std::string, std::string>> env = {{"HOOP_NCHANNELS", "3"}};
  if (std::string(GetParam()) == "tcp") env.emplace_back("HOOP_TRANSPORT", "tcp");
  run_job(3, make_channel_cases(), [](int) { return -1; }, env);
}

INSTANTIATE_TEST_SUITE_P(Transports, MultiChannelRingTest, ::testing::Values("shm", "tcp"),
                         [](const ::testing::TestParamInfo<const char*>& p) { return std::string(p.param); });

struct FakeTopology {
  const char* name;
  std::vector<int> hosts;
};

class HierarchicalFakeHostsTest : public ::testing::TestWithParam<FakeTopology> {};

TEST_P(HierarchicalFakeHostsTest, AllReduce) {
  const auto hosts = GetParam().hosts;
  run_job(static_cast<int>(hosts.size()), make_cases(true),
          [hosts](int r) { return hosts[static_cast<size_t>(r)]; });
}

INSTANTIATE_TEST_SUITE_P(Topologies, HierarchicalFakeHostsTest,
                         ::testing::Values(FakeTopology{"h2x2", {0, 0, 1, 1}},
                                           FakeTopology{"h2x3", {0, 0, 0, 1, 1, 1}},
                                           FakeTopology{"h3x1", {0, 1, 2}},
                                           FakeTopology{"uneven3plus1", {0, 0, 0, 1}},
                                           FakeTopology{"interleaved", {0, 1, 0, 1}}),
                         [](const ::testing::TestParamInfo<FakeTopology>& p) { return std::string(p.param.name); });

}  // namespace
}  // namespace hoop::test
