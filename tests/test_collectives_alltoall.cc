// AllToAll and AllToAllv end to end, every registered algorithm (schedule::algorithms_for) on
// 1, 2, 3, 5 and 8 ranks over shared memory and TCP (the leaders' also on fake hosts): exact data in every block, counts 0, 1,
// primes and non-multiples of N, uneven AllToAllv counts with zeros for some peers, packed and
// spread blocks, in and out of place, nothing written outside the blocks or past the end.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "comm/algo_choice.h"
#include "support/coll_job.h"
#include "support/reference.h"
#include "support/vcounts.h"
#include "tuner/tuner.h"

namespace hoop::test {
namespace {

// Every algorithm that runs over the job's transport (shm-direct needs shared memory). 1009 per
// block takes shm-direct's slots from 5 ranks on, 70001 over two of its chunks, 140009 its
// single copy (from 1 MiB in all).
std::vector<CollCase> make_cases(const JobParam& p) {
  const int n = p.nranks;
  const schedule::Reach reach{true, std::string(p.transport) == "shm"};
  std::vector<CollCase> cases;
  for (const std::string& algo : schedule::algorithms_for(OpType::alltoall, reach)) {
    std::vector<size_t> counts{0, 1, 13, static_cast<size_t>(7 * n + 3), 1009};
    if (n == 2 || n == 3) counts.insert(counts.end(), {70001, 140009});
    for (size_t count : counts) {
      for (bool in_place : {false, true}) {
        cases.push_back({.op = OpType::alltoall, .algo = algo, .count = count, .in_place = in_place});
      }
    }
    cases.push_back({.op = OpType::alltoall, .algo = algo, .dt = DataType::u8, .count = 5});
    cases.push_back({.op = OpType::alltoall, .algo = algo, .dt = DataType::f64, .count = 3, .in_place = true});
  }
  for (const std::string& algo : schedule::algorithms_for(OpType::alltoallv, reach)) {
    for (int pattern = 0; pattern < kCountPatterns; ++pattern) {
      for (bool spread : {false, true}) {
        cases.push_back({.op = OpType::alltoallv, .algo = algo, .count = size_t(pattern), .spread = spread});
      }
    }
    cases.push_back({.op = OpType::alltoallv, .algo = algo, .dt = DataType::u8, .count = 3, .spread = true});
  }
  return cases;
}

void run_case(Communicator& comm, const CollCase& c, uint64_t seed) {
  const int r = comm.rank(), n = comm.size();
  const size_t es = dtype_size(c.dt);
  OpOptions o;
  o.algo = c.algo;
  if (c.op == OpType::alltoall) {
    const size_t total = c.count * static_cast<size_t>(n);
    std::vector<unsigned char> send(total * es + 1);
    auto recv = sentinel_buffer(total * es);
    ref::fill_inputs(c.in_place ? recv.data() : send.data(), c.dt, RedOp::sum, seed, r, 0, total);
    const uint64_t before = ref::hash_bytes(send.data(), total * es);
    comm.alltoall(c.in_place ? recv.data() : send.data(), recv.data(), c.count, c.dt, o);
    for (int q = 0; q < n; ++q) {
      EXPECT_EQ(ref::check_inputs(recv.data() + q * c.count * es, c.dt, RedOp::sum, seed, q, r * c.count, c.count), "")
          << "block from rank " << q;
    }
    EXPECT_EQ(untouched_outside(recv.data(), recv.size(), schedule::Blocks::uniform(c.count, n), es), "");
    if (!c.in_place) {
      EXPECT_EQ(ref::hash_bytes(send.data(), total * es), before) << "the input was modified";
    }
  } else {
    const int pattern = static_cast<int>(c.count);
    const auto sb = layout_blocks(send_counts(c.op, pattern, r, n, 0), c.spread);
    const auto rb = layout_blocks(recv_counts(c.op, pattern, r, n, 0), c.spread);
    std::vector<unsigned char> send(sb.extent() * es + 1);
    auto recv = sentinel_buffer(rb.extent() * es);
    ref::fill_inputs(send.data(), c.dt, RedOp::sum, seed, r, 0, sb.extent());
    const std::vector<size_t> none;
    comm.alltoallv(send.data(), sb.counts, c.spread ? sb.displs : none, recv.data(), rb.counts,
                   c.spread ? rb.displs : none, c.dt, o);
    for (int q = 0; q < n; ++q) {
      const size_t from = layout_blocks(send_counts(c.op, pattern, q, n, 0), c.spread).displ(r);
      EXPECT_EQ(ref::check_inputs(recv.data() + rb.displ(q) * es, c.dt, RedOp::sum, seed, q, from, rb.count(q)), "")
          << "block from rank " << q;
    }
    EXPECT_EQ(untouched_outside(recv.data(), recv.size(), rb, es), "");
  }
}

class AllToAllTest : public ::testing::TestWithParam<JobParam> {};

TEST_P(AllToAllTest, EveryAlgorithmExact) { run_cases(GetParam(), make_cases(GetParam()), run_case); }

INSTANTIATE_TEST_SUITE_P(AllToAll, AllToAllTest, ::testing::ValuesIn(job_params()), job_param_name);

// Through the hosts' leaders on fake hosts: blocks inside a host over shared memory, one
// message between two leaders over TCP; hosts of unequal size, interleaved in rank order, and
// three hosts.
class AllToAllLeadersTest : public ::testing::TestWithParam<std::vector<int>> {};

TEST_P(AllToAllLeadersTest, ExactOnFakeHosts) {
  const std::vector<int> hosts = GetParam();
  const int n = static_cast<int>(hosts.size());
  std::vector<CollCase> cases;
  for (size_t count : {size_t{0}, size_t{1}, size_t{13}, static_cast<size_t>(7 * n + 3), size_t{1009}}) {
    for (bool in_place : {false, true}) {
      cases.push_back({.op = OpType::alltoall, .algo = "leaders", .count = count, .in_place = in_place});
    }
  }
  cases.push_back({.op = OpType::alltoall, .algo = "leaders", .dt = DataType::u8, .count = 5});
  cases.push_back({.op = OpType::alltoall, .algo = "leaders", .dt = DataType::f64, .count = 3, .in_place = true});
  run_job({n, "auto", hosts}, [&](RankContext&, Communicator& comm) {
    for (size_t i = 0; i < cases.size(); ++i) {
      SCOPED_TRACE(cases[i].describe());
      run_case(comm, cases[i], ref::mix64(i + 37));
      EXPECT_EQ(comm.last_algorithm(), "leaders");
    }
    const int host = hosts[static_cast<size_t>(comm.rank())];
    for (const LinkStats& link : comm.stats().links) {
      EXPECT_EQ(link.transport, hosts[static_cast<size_t>(link.peer)] == host ? "shm" : "tcp") << "link to " << link.peer;
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Topologies, AllToAllLeadersTest,
                         ::testing::Values(std::vector<int>{0, 0, 1, 1}, std::vector<int>{0, 0, 0, 1},
                                           std::vector<int>{0, 1, 0, 1, 0}, std::vector<int>{0, 0, 1, 1, 2, 2}),
                         [](const ::testing::TestParamInfo<std::vector<int>>& p) {
                           std::string name = "hosts";
                           for (int h : p.param) name += std::to_string(h);
                           return name;
                         });

// shm-direct's slots out of place over several chunks and stages, where the default takes the
// single copy: without it, and with chunks small enough that stages are reused.
TEST(AllToAllDirect, SlotsWithoutTheSingleCopy) {
  std::vector<CollCase> cases;
  for (size_t count : {size_t{257}, size_t{4099}, size_t{70001}}) {
    for (bool in_place : {false, true}) {
      cases.push_back({.op = OpType::alltoall, .algo = "shm-direct", .count = count, .in_place = in_place});
    }
  }
  for (int n : {2, 3}) {
    run_job({n, "shm"}, [&](RankContext&, Communicator& comm) {
      for (size_t i = 0; i < cases.size(); ++i) {
        SCOPED_TRACE(cases[i].describe());
        run_case(comm, cases[i], ref::mix64(i + 17));
        EXPECT_EQ(comm.last_algorithm(), "shm-direct");
      }
    }, {{"HOOP_DIRECT_SINGLE_COPY_ALLTOALL_BYTES", "0"}, {"HOOP_DIRECT_CHUNK_BYTES", "8K"}, {"HOOP_DIRECT_SMALL_BYTES", "1K"}});
  }
}

// The engine gathers a step's sends on one link into one write (Bruck's several blocks to one
// peer): through links far smaller than a step and slices of 4 KiB, writes end part-way through
// a block, a padding or the header, and blocks of every size (empty ones too) still arrive whole
// and in order.
TEST(EngineGatheredSends, BruckThroughLinksSmallerThanItsSteps) {
  std::vector<CollCase> cases;
  for (size_t count : {size_t{0}, size_t{1}, size_t{3}, size_t{257}, size_t{1031}, size_t{6007}}) {
    for (bool in_place : {false, true}) {
      cases.push_back({.op = OpType::alltoall, .algo = "bruck", .count = count, .in_place = in_place});
    }
  }
  cases.push_back({.op = OpType::alltoall, .algo = "bruck", .dt = DataType::u8, .count = 5});
  for (const JobParam& p : {JobParam{5, "shm"}, JobParam{8, "shm"}, JobParam{5, "tcp"}}) {
    run_job(p, [&](RankContext&, Communicator& comm) {
      for (size_t i = 0; i < cases.size(); ++i) {
        SCOPED_TRACE(cases[i].describe());
        run_case(comm, cases[i], ref::mix64(i + 29));
        EXPECT_EQ(comm.last_algorithm(), "bruck");
      }
    }, {{"HOOP_SHM_RING_BYTES", "4K"}, {"HOOP_SLICE_BYTES", "4K"}, {"HOOP_SOCKET_BUFFER", "4K"},
        {"HOOP_TCP_STAGING_BYTES", "4K"}});
  }
}

// The tuner prices the schedules: with one rank per host, Bruck's log N steps win for small
// blocks, pairwise's fewer bytes for large ones; with 8 ranks per host small blocks go through
// the hosts' leaders (one message between two hosts), large ones pairwise.
TEST(AllToAllTuner, PicksBruckOrTheLeadersForSmallBlocksAndPairwiseForLarge) {
  for (int per_host : {1, 8}) {
    SCOPED_TRACE(per_host);
    schedule::Topology topo;
    for (int r = 0; r < 64; ++r) topo.host_of_rank.push_back(r / per_host);
    tuner::Tuner t(tuner::CostModel{}, topo, tuner::LinkView::Force::none);
    schedule::CollectiveDesc d;
    d.op = OpType::alltoall;
    d.nranks = 64;
    const auto names = schedule::algorithms_for(OpType::alltoall);
    d.count = 16;
    EXPECT_EQ(t.choose(d, 4, names).algorithm, per_host == 1 ? "bruck" : "leaders");
    d.count = 1 << 20;
    EXPECT_EQ(t.choose(d, 4, names).algorithm, "pairwise");
  }
}

TEST(AllToAllTuner, HoopAlgoForcesPerCollective) {
  EXPECT_EQ(detail::algorithm_from_text("alltoall:bruck,gather:binomial", OpType::alltoall), "bruck");
  EXPECT_EQ(detail::algorithm_from_text("alltoall:bruck,gather:binomial", OpType::gather), "binomial");
  EXPECT_EQ(detail::algorithm_from_text("bruck", OpType::allreduce), "");
  EXPECT_THROW(detail::algorithm_from_text("alltoallv:bruck", OpType::alltoallv), Error);
  run_job({3, "shm"}, [](RankContext&, Communicator& comm) {
    std::vector<int32_t> send(6, comm.rank()), recv(6);
    comm.alltoall(send.data(), recv.data(), 2, DataType::i32);
    EXPECT_EQ(comm.last_algorithm(), "bruck");
    comm.gather(send.data(), recv.data(), 2, DataType::i32, 0);
    EXPECT_EQ(comm.last_algorithm(), "binomial");
    comm.scatter(recv.data(), send.data(), 2, DataType::i32, 0);
    EXPECT_EQ(comm.last_algorithm(), "linear");
  }, {{"HOOP_ALGO", "alltoall:bruck,gather:binomial,scatter:linear"}});
}

}  // namespace
}  // namespace hoop::test
