// The tuner's cost model on hand-made schedules (exact numbers), selection, and HOOP_ALGO parsing.
#include <gtest/gtest.h>

#include <cmath>

#include "comm/algo_choice.h"
#include "hoop/error.h"
#include "schedule/schedule_builders.h"
#include "tuner/cost_model.h"
#include "tuner/predict.h"
#include "tuner/pricing.h"
#include "tuner/tuner.h"

namespace hoop {
namespace {

using schedule::Buf;
using schedule::Range;
using schedule::RankSchedule;
using tuner::CostModel;
using tuner::LinkView;

// Round numbers: 1 us per message, 1 GB/s, reductions at 1 GB/s, copies free.
CostModel round_model() {
  CostModel m;
  m.shm = {1e-6, 1e9, 1e9};
  m.tcp = {10e-6, 1e9, 1e9};
  m.gamma = 1e-9;
  m.copy = 0;
  m.overhead_fraction = 0.5;
  m.slice_bytes = 262144;
  return m;
}

RankSchedule one_step(std::vector<schedule::Action> actions) {
  RankSchedule s;
  s.algorithm = "hand";
  s.steps.push_back({std::move(actions)});
  return s;
}

Range elems(size_t n) { return Range{Buf::send, 0, n}; }

TEST(TunerModel, OneMessageCostsAlphaPlusBytesOverBeta) {
  const auto topo = schedule::Topology::single_host(2);
  const LinkView links{&topo, LinkView::Force::none};
  std::vector<RankSchedule> ranks = {one_step({schedule::send_to(1, elems(1000))}),
                                     one_step({schedule::recv_copy_from(0, Range{Buf::recv, 0, 1000})})};
  const auto p = tuner::predict_schedules(ranks, 4, links, round_model());
  ASSERT_TRUE(p.applicable);
  EXPECT_NEAR(p.seconds, 1e-6 + 4000 / 1e9, 1e-12);  // 5 us
  EXPECT_EQ(p.steps, 1u);
  EXPECT_EQ(p.max_link_bytes, 4000u);
  EXPECT_EQ(p.max_rank_bytes_sent, 4000u);
  EXPECT_EQ(p.ranks_evaluated, 2);
  EXPECT_FALSE(p.sampled);
}

TEST(TunerModel, ReductionAddsGammaPerByte) {
  const auto topo = schedule::Topology::single_host(2);
  const LinkView links{&topo, LinkView::Force::none};
  std::vector<RankSchedule> ranks = {
      one_step({schedule::send_to(1, elems(1000))}),
      one_step({schedule::recv_reduce_from(0, elems(1000), Range{Buf::recv, 0, 1000})})};
  const auto p = tuner::predict_schedules(ranks, 4, links, round_model());
  EXPECT_NEAR(p.seconds, 5e-6 + 4000 * 1e-9, 1e-12);  // 9 us, on the receiver
  EXPECT_EQ(p.critical_rank, 1);
}

TEST(TunerModel, SendsOfOneStepShareTheEndpointAndPayTheExtraMessage) {
  const auto topo = schedule::Topology::single_host(3);
  const LinkView links{&topo, LinkView::Force::none};
  std::vector<RankSchedule> ranks = {
      one_step({schedule::send_to(1, elems(1000)), schedule::send_to(2, elems(1000))}),
      one_step({schedule::recv_copy_from(0, Range{Buf::recv, 0, 1000})}),
      one_step({schedule::recv_copy_from(0, Range{Buf::recv, 0, 1000})})};
  const auto p = tuner::predict_schedules(ranks, 4, links, round_model());
  // Rank 0: alpha * (1 + 0.5) + 8000 B / 1 GB/s.
  EXPECT_NEAR(p.seconds, 1.5e-6 + 8e-6, 1e-12);
  EXPECT_EQ(p.critical_rank, 0);
}

TEST(TunerModel, StepsAddUp) {
  const auto topo = schedule::Topology::single_host(2);
  const LinkView links{&topo, LinkView::Force::none};
  RankSchedule a, b;
  for (int k = 0; k < 3; ++k) {
    a.steps.push_back({{schedule::send_to(1, elems(250))}});
    b.steps.push_back({{schedule::recv_copy_from(0, Range{Buf::recv, 0, 250})}});
  }
  const auto p = tuner::predict_schedules({a, b}, 4, links, round_model());
  EXPECT_NEAR(p.seconds, 3 * (1e-6 + 1000 / 1e9), 1e-12);
  EXPECT_EQ(p.steps, 3u);
  EXPECT_EQ(p.max_link_bytes, 3000u);
}

// Rank 0 sends n elements to rank 1, which forwards each slice to rank 2 once it has it; the
// same step `steps` times.
std::vector<RankSchedule> forwarding_chain(size_t n, int steps) {
  const std::vector<std::vector<schedule::Action>> actions = {
      {schedule::send_to(1, elems(n))},
      {schedule::recv_copy_from(0, Range{Buf::recv, 0, n}), schedule::send_to(2, Range{Buf::recv, 0, n}, 0)},
      {schedule::recv_copy_from(1, Range{Buf::recv, 0, n})}};
  std::vector<RankSchedule> ranks(actions.size());
  for (size_t r = 0; r < actions.size(); ++r)
    for (int k = 0; k < steps; ++k) ranks[r].steps.push_back({actions[r]});
  return ranks;
}

TEST(TunerModel, ForwardingChainWaitsOneSlicePerHop) {
  const auto topo = schedule::Topology::single_host(3);
  const LinkView links{&topo, LinkView::Force::none};
  const size_t n = 1 << 20;  // 4 MiB of f32
  const auto p = tuner::predict_schedules(forwarding_chain(n, 1), 4, links, round_model());
  const double message = 1e-6 + 4.0 * n / 1e9;
  const double hop = 1e-6 + 262144 / 1e9;  // rank 1 forwards a slice after receiving it
  EXPECT_NEAR(p.seconds, hop + message, 1e-12);
  EXPECT_EQ(p.critical_rank, 2);
}

TEST(TunerModel, PipelineFillIsPaidOncePerRank) {
  // The chain of the test above, twice: the second step's transfers overlap the first step's
  // forwarding tail, so the fill (one hop) is paid once, not per step.
  const auto topo = schedule::Topology::single_host(3);
  const LinkView links{&topo, LinkView::Force::none};
  const size_t n = 1 << 20;
  const auto p = tuner::predict_schedules(forwarding_chain(n, 2), 4, links, round_model());
  const double message = 1e-6 + 4.0 * n / 1e9;
  const double hop = 1e-6 + 262144 / 1e9;
  EXPECT_NEAR(p.seconds, hop + 2 * message, 1e-12);
}


TEST(TunerModel, AForwardedSendWaitsOnlyForTheReceiveItForwards) {
  // Rank 2 hears from rank 1 (which forwards rank 0's message) and from rank 4, and forwards
  // one of the two to rank 3. Rank 3 waits one hop when it gets rank 4's message, two when it
  // gets rank 0's: not two either way (a tree's rank hears from its parents in both trees and
  // forwards to children in one).
  const auto topo = schedule::Topology::single_host(5);
  const LinkView links{&topo, LinkView::Force::none};
  const size_t n = 1 << 20;
  auto ranks = [&](int forwarded) {
    std::vector<RankSchedule> r(5);
    r[0] = one_step({schedule::send_to(1, elems(n))});
    r[1] = one_step({schedule::recv_copy_from(0, Range{Buf::recv, 0, n}), schedule::send_to(2, Range{Buf::recv, 0, n}, 0)});
    r[4] = one_step({schedule::send_to(2, elems(n))});
    r[2] = one_step({schedule::recv_copy_from(1, Range{Buf::recv, 0, n}), schedule::recv_copy_from(4, Range{Buf::recv, n, n}),
                     schedule::send_to(3, Range{Buf::recv, static_cast<size_t>(forwarded) * n, n}, forwarded)});
    r[3] = one_step({schedule::recv_copy_from(2, Range{Buf::recv, 0, n})});
    return r;
  };
  const double hop = 1e-6 + 262144 / 1e9;
  auto rank3 = [&](int forwarded) {
    const auto p = tuner::predict_schedules(ranks(forwarded), 4, links, round_model());
    for (const auto& [r, t] : p.rank_seconds) {
      if (r == 3) return t;
    }
    return -1.0;
  };
  const double via_rank4 = rank3(1), via_rank1 = rank3(0);
  EXPECT_NEAR(via_rank1 - via_rank4, hop, 1e-12);
  EXPECT_NEAR(via_rank4, 1e-6 + 4.0 * n / 1e9 + hop, 1e-12);
}
TEST(TunerModel, TcpRanksOfOneHostShareItsNic) {
  // Hosts {0,1} and {2,3}: ranks 0 and 1 both send to the other host in the same step.
  schedule::Topology topo;
  topo.host_of_rank = {0, 0, 1, 1};
  const LinkView links{&topo, LinkView::Force::none};
  std::vector<RankSchedule> ranks = {one_step({schedule::send_to(2, elems(1000))}),
                                     one_step({schedule::send_to(3, elems(1000))}),
                                     one_step({schedule::recv_copy_from(0, Range{Buf::recv, 0, 1000})}),
                                     one_step({schedule::recv_copy_from(1, Range{Buf::recv, 0, 1000})})};
  CostModel m = round_model();
  auto p = tuner::predict_schedules(ranks, 4, links, m);
  EXPECT_NEAR(p.seconds, 10e-6 + 8000 / 1e9, 1e-12);  // 8000 B through one 1 GB/s NIC
  EXPECT_EQ(p.max_host_tcp_bytes, 8000u);
  m.tcp.endpoint_beta = 2e9;  // a NIC twice as fast as one connection
  p = tuner::predict_schedules(ranks, 4, links, m);
  EXPECT_NEAR(p.seconds, 10e-6 + 4000 / 1e9, 1e-12);
  // Forcing shm prices the same schedules as one host.
  const LinkView shm{&topo, LinkView::Force::shm};
  p = tuner::predict_schedules(ranks, 4, shm, round_model());
  EXPECT_NEAR(p.seconds, 1e-6 + 4000 / 1e9, 1e-12);
}

TEST(TunerModel, RingAllReducePricedFromItsSchedule) {
  // 4 ranks, one host: 6 steps of one chunk each way; 3 of them reduce.
  const auto topo = schedule::Topology::single_host(4);
  schedule::CollectiveDesc d;
  d.op = OpType::allreduce;
  d.count = 4000;
  d.nranks = 4;
  d.topology = &topo;
  const auto p = tuner::predict("ring", d, 4, LinkView{&topo, LinkView::Force::none}, round_model());
  ASSERT_TRUE(p.applicable) << p.why_not;
  const double chunk = 1000 * 4;
  EXPECT_NEAR(p.seconds, 6 * (1e-6 + chunk / 1e9) + 3 * chunk * 1e-9, 1e-12);
  EXPECT_EQ(p.steps, 6u);
  EXPECT_EQ(p.max_rank_bytes_sent, 6 * 4000u);  // 2(N-1)/N * 16000 B
}

schedule::Topology one_rank_per_host(int n) {
  schedule::Topology t;
  for (int r = 0; r < n; ++r) t.host_of_rank.push_back(r);
  return t;
}

schedule::CollectiveDesc chain_call(OpType op, int n, const schedule::Topology& topo) {
  schedule::CollectiveDesc d;
  d.op = op;
  d.count = 4000;  // 16000 B of f32: one slice
  d.nranks = n;
  d.topology = &topo;
  return d;
}

TEST(TunerModel, BroadcastAndReduceChainBetweenHostsArePricedAsOneCallOfAStream) {
  // A chain of hosts: in back-to-back Broadcasts (and Reduces) every hop between hosts fills
  // while the calls before drain, so a call costs one message whatever the number of hosts.
  const double message = 10e-6 + 16000 / 1e9;
  for (int n : {4, 8, 16}) {
    const auto topo = one_rank_per_host(n);
    const auto p = tuner::predict("chain", chain_call(OpType::broadcast, n, topo), 4,
                                  LinkView{&topo, LinkView::Force::none}, round_model());
    ASSERT_TRUE(p.applicable) << p.why_not;
    EXPECT_NEAR(p.seconds, message, 1e-12) << n << " hosts";
  }
  // The Reduce's chain too: one message and its reduction. Its tree, whose inner ranks wait
  // for two children, keeps the fill of its levels (3 on 8 ranks).
  const auto topo = one_rank_per_host(8);
  const LinkView hosts{&topo, LinkView::Force::none};
  const auto reduce = tuner::predict("chain", chain_call(OpType::reduce, 8, topo), 4, hosts, round_model());
  EXPECT_NEAR(reduce.seconds, message + 16000 * 1e-9, 1e-12);
  const auto tree = tuner::predict("tree", chain_call(OpType::reduce, 8, topo), 4, hosts, round_model());
  EXPECT_GT(tree.seconds, 2 * message);
  // Within a host whose 2 cores its 8 ranks share, for a call smaller than a slice; a larger
  // one keeps the fill of its hops (one slice each), whose copies compete for the cores.
  const auto host = schedule::Topology::single_host(8);
  const std::vector<int> one_machine(8, 0);
  CostModel two_cores = round_model();
  two_cores.cores = 2;
  const LinkView shared{&host, LinkView::Force::none, &one_machine};
  auto d = chain_call(OpType::broadcast, 8, host);
  auto shm = tuner::predict("chain", d, 4, shared, two_cores);
  EXPECT_NEAR(shm.seconds, 1e-6 + 16000 / 1e9, 1e-12);
  d.count = 262144;  // 1 MiB, four slices
  shm = tuner::predict("chain", d, 4, shared, two_cores);
  EXPECT_NEAR(shm.seconds, (1e-6 + 1048576 / 1e9) + 6 * (1e-6 + 262144 / 1e9), 1e-12);
  // On cores of their own each rank of the stream works at its own pace: a hand-over through
  // the ring, and its own copies (a middle rank copies each slice out of one ring and into the
  // next), whatever the length of the chain.
  CostModel own = round_model();
  own.copy = 1e-10;
  shm = tuner::predict("chain", d, 4, LinkView{&host, LinkView::Force::none}, own);
  EXPECT_NEAR(shm.seconds, 1e-6 + 2 * 1048576 * 1e-10, 1e-12);
}

TEST(TunerModel, AReduceChainOnSharedCoresRunsAheadWhileItsRingHoldsManyCalls) {
  // 8 ranks of one host on 2 cores, a Reduce's chain of 256 KiB: each rank's processor time is
  // its copy into the next ring (0.5 ns a byte) and its reduction (1 ns a byte); the machine's
  // is their sum over 2 cores.
  const auto host = schedule::Topology::single_host(8);
  const std::vector<int> one_machine(8, 0);
  const LinkView shared{&host, LinkView::Force::none, &one_machine};
  CostModel m = round_model();
  m.cores = 2;
  m.shm.cpu_byte = 0.5e-9;
  auto d = chain_call(OpType::reduce, 8, host);
  d.count = 65536;
  const double bytes = 262144;
  const double send = bytes * 0.5e-9, reduce = bytes * 1e-9;
  // A 4 MiB ring holds 16 such calls: the senders run ahead, each receive is reduced straight
  // from the ring (no copy at that end) and the hops fill while the calls before drain. With no
  // copy through memory measured (memory_copy 0), each send is charged cpu_byte.
  m.shm_ring_bytes = 4 << 20;
  const auto ahead = tuner::predict("chain", d, 4, shared, m);
  ASSERT_TRUE(ahead.applicable) << ahead.why_not;
  EXPECT_NEAR(ahead.seconds, (send + 6 * (send + reduce) + reduce) / 2, 1e-12);
  // A 2 MiB ring holds 8: every receive copies too, and the root waits for the six forwarding
  // hops of one slice (its transfer and reduction) as in one call.
  m.shm_ring_bytes = 2 << 20;
  const auto step = tuner::predict("chain", d, 4, shared, m);
  const double receive = bytes * 0.5e-9, hop = 1e-6 + bytes / 1e9 + reduce;
  EXPECT_NEAR(step.seconds, (send + 6 * (receive + send + reduce) + receive + reduce) / 2 + 6 * hop, 1e-12);
}

TEST(TunerSelect, SmallBroadcastAndReduceBetweenHostsGoDownTheChain) {
  // Naive's root sends (receives) seven messages per call, the tree's levels fill, the chain's
  // ranks send one each.
  const auto topo = one_rank_per_host(8);
  tuner::Tuner t(round_model(), topo, LinkView::Force::none);
  for (OpType op : {OpType::broadcast, OpType::reduce}) {
    schedule::CollectiveDesc d = chain_call(op, 8, topo);
    d.count = 256;
    EXPECT_EQ(t.choose(d, 4, detail::candidate_algorithms(op)).algorithm, "ring") << to_string(op);
  }
}

TEST(TunerSelect, SmallReduceScatterOnRanksSharingAMachineGoesThroughTheRoot) {
  // 8 hosts of one rank on one machine of 2 cores (the lab): each message costs the processor
  // 5 us at each end and a hand-over 10 us per rank of a core. Naive's 14 messages, its root's
  // receives travelling together, beat halving-doubling's 48 exchanges for small blocks; the
  // ring's N-1 steps of a block each take over when the root's link carries too much.
  const auto topo = one_rank_per_host(8);
  CostModel m = round_model();
  m.tcp.alpha = 30e-6;
  m.tcp.beta = m.tcp.endpoint_beta = 125e6;
  m.tcp.cpu = 5e-6;
  m.tcp.handoff = 10e-6;
  m.cores = 2;
  tuner::Tuner t(m, topo, LinkView::Force::none);
  t.set_machines(std::vector<int>(8, 0));
  schedule::CollectiveDesc d;
  d.op = OpType::reducescatter;
  d.nranks = 8;
  d.topology = &topo;
  d.count = 32;  // 1 KiB of input a rank
  EXPECT_EQ(t.choose(d, 4, detail::candidate_algorithms(d.op)).algorithm, "naive");
  d.count = 1 << 20;  // 32 MiB
  EXPECT_EQ(t.choose(d, 4, detail::candidate_algorithms(d.op)).algorithm, "ring");
  // Without the shared machine the log-step exchange wins the small blocks.
  tuner::Tuner alone(m, topo, LinkView::Force::none);
  d.count = 32;
  EXPECT_EQ(alone.choose(d, 4, detail::candidate_algorithms(d.op)).algorithm, "halving-doubling");
}

// Pairwise links every pair of ranks: where a host's ranks would hold more rings than fit
// (L(L-1) rings within 4 GiB: transport::every_pair_fits) at the ring a link gets before it
// shrinks for a host of many ranks, the tuner passes it by, and picks another algorithm; over
// TCP for every pair, or on hosts of fewer ranks, or with smaller rings asked for, it stays.
TEST(TunerSelect, PairwiseIsPassedByWhereEveryPairsRingsWouldNotFit) {
  CostModel m = round_model();
  m.shm_ring_bytes = m.shm_ring_full_bytes = size_t{4} << 20;
  const auto hosts_of = [](int hosts, int per_host) {
    std::vector<std::string> ids;
    for (int h = 0; h < hosts; ++h) ids.insert(ids.end(), static_cast<size_t>(per_host), "host" + std::to_string(h));
    return schedule::Topology::from_host_ids(ids);
  };
  const auto price_pairwise = [&](const schedule::Topology& topo, LinkView::Force force) {
    schedule::CollectiveDesc d;
    d.op = OpType::alltoall;
    d.nranks = static_cast<int>(topo.host_of_rank.size());
    d.topology = &topo;
    d.count = 1024;
    return tuner::price(tuner::Pricing::sampled_walk, "pairwise", d, 4, LinkView{&topo, force}, m);
  };
  const auto crowded = hosts_of(1, 64);
  const auto two = hosts_of(2, 32);
  EXPECT_NE(price_pairwise(crowded, LinkView::Force::none).why_not.find("pairwise links every pair: 64 ranks"),
            std::string::npos);
  EXPECT_TRUE(price_pairwise(crowded, LinkView::Force::tcp).why_not.empty());
  EXPECT_TRUE(price_pairwise(two, LinkView::Force::none).why_not.empty());
  // The default rings of a host of 64 ranks, shrunk from 4 MiB to 1 MiB so that AllToAllv's
  // pairwise fits: pairwise AllToAll, which has others, is still passed by.
  m.shm_ring_bytes = size_t{1} << 20;
  EXPECT_NE(price_pairwise(crowded, LinkView::Force::none).why_not.find("pairwise links every pair: 64 ranks"),
            std::string::npos);
  m.shm_ring_full_bytes = size_t{1} << 20;  // 1 MiB asked for (HOOP_SHM_RING_BYTES): 64 x 63 rings fit
  EXPECT_TRUE(price_pairwise(crowded, LinkView::Force::none).why_not.empty());

  m.shm_ring_bytes = m.shm_ring_full_bytes = size_t{4} << 20;
  tuner::Tuner t(m, crowded, LinkView::Force::none);
  schedule::CollectiveDesc d;
  d.op = OpType::alltoall;
  d.nranks = 64;
  d.topology = &crowded;
  d.count = 1 << 16;
  const std::string pick = t.choose(d, 4, detail::candidate_algorithms(d.op)).algorithm;
  EXPECT_NE(pick, "pairwise");
  EXPECT_FALSE(pick.empty());
}

// A shaped link (sustained below the burst rate) gets a receive window of 2 ms at its rate,
// at least 64 KiB; an unshaped one keeps the configured buffer.
TEST(TunerModel, ShapedLinksGetBuffersOfTwoMillisecondsAtTheirRate) {
  CostModel m;
  EXPECT_EQ(tuner::shaped_link_window(m), 0u);
  m.tcp.sustained = 25e6;  // 200 Mbit/s
  EXPECT_EQ(tuner::shaped_link_window(m), 64u * 1024);
  m.tcp.sustained = 122e6;  // 1 Gbit/s
  EXPECT_EQ(tuner::shaped_link_window(m), 244000u);
}

TEST(TunerModel, UnknownAlgorithmIsNotApplicable) {
  schedule::CollectiveDesc d;
  d.nranks = 4;
  d.count = 16;
  const auto p = tuner::predict("no-such-algorithm", d, 4, LinkView{}, round_model());
  EXPECT_FALSE(p.applicable);
  EXPECT_NE(p.why_not.find("no-such-algorithm"), std::string::npos) << p.why_not;
}

TEST(TunerModel, LargeJobsAreSampled) {
  schedule::Topology topo;
  for (int r = 0; r < 1024; ++r) topo.host_of_rank.push_back(r / 8);
  schedule::CollectiveDesc d;
  d.op = OpType::allreduce;
  d.count = 1 << 20;
  d.nranks = 1024;
  d.topology = &topo;
  const auto p = tuner::predict("ring", d, 4, LinkView{&topo, LinkView::Force::none}, round_model());
  ASSERT_TRUE(p.applicable);
  EXPECT_TRUE(p.sampled);
  EXPECT_GE(p.ranks_evaluated, 16);
  EXPECT_LE(p.ranks_evaluated, 64);
  EXPECT_EQ(p.steps, 2u * 1023);
  EXPECT_GT(p.seconds, 2 * 1023 * 1e-6);
}

// What the calibration writes to its cache is what hoop-sim --model reads back.
TEST(TunerModel, ACalibrationCacheFileLoadsAsItsModel) {
  CostModel m = round_model();
  m.tcp.sustained = 1.2e8;
  m.shm.handoff = 4e-6;
  m.cores = 2;
  const std::string cache = std::string("{\"format\": 2, \"measured_shm\": true, \"measured_tcp\": true, \"model\": ") +
                            tuner::to_json(m) + "}";
  const CostModel back = tuner::model_from_json(cache);
  EXPECT_EQ(back.tcp.sustained, m.tcp.sustained);
  EXPECT_EQ(back.shm.handoff, m.shm.handoff);
  EXPECT_EQ(back.shm.alpha, m.shm.alpha);
  EXPECT_EQ(back.cores, 2);
}

TEST(TunerModel, JsonRoundTripIsExact) {
  CostModel m = round_model();
  m.shm_ring_bytes = 3 << 20;
  m.shm_ring_full_bytes = 12 << 20;
  m.single_copy_read_bytes = 256 << 10;
  m.memory_copy = 1.0 / 13e9;
  m.shm.beta = 1.0 / 3.0 * 1e10;
  m.gamma = 0.1 / 7;
  m.source = "measured";
  const CostModel back = tuner::model_from_json(tuner::to_json(m));
  EXPECT_EQ(back.shm.beta, m.shm.beta);
  EXPECT_EQ(back.gamma, m.gamma);
  EXPECT_EQ(back.tcp.alpha, m.tcp.alpha);
  EXPECT_EQ(back.slice_bytes, m.slice_bytes);
  EXPECT_EQ(back.shm_ring_bytes, m.shm_ring_bytes);
  EXPECT_EQ(back.shm_ring_full_bytes, m.shm_ring_full_bytes);
  EXPECT_EQ(back.single_copy_read_bytes, m.single_copy_read_bytes);
  EXPECT_EQ(back.memory_copy, m.memory_copy);
  // A model written before the copy through memory was measured: not measured.
  EXPECT_EQ(tuner::model_from_json("{\"cores\": 2}").memory_copy, 0);
  EXPECT_THROW(tuner::model_from_json("{\"memory_copy_s_per_byte\": -1}"), Error);
  // A model written before the kernel read was measured: not measured.
  EXPECT_EQ(tuner::model_from_json("{\"cores\": 2}").single_copy_read_bytes, 0u);
  EXPECT_THROW(tuner::model_from_json("{\"single_copy_read_bytes\": -1}"), Error);
  // A model written before the full ring existed: its ring did not shrink.
  EXPECT_EQ(tuner::model_from_json("{\"shm_ring_bytes\": 2097152}").shm_ring_full_bytes, size_t{2} << 20);
  EXPECT_EQ(back.source, "measured");
  EXPECT_THROW(tuner::model_from_json("{\"shm\": {\"alpha_s\": -1, \"beta_Bps\": 1}}"), Error);
  EXPECT_THROW(tuner::model_from_json("not json"), Error);
  EXPECT_THROW(tuner::model_from_json("{\"tcpp\": {}}"), Error);  // nothing of a model: not defaults
  const std::string table = tuner::to_table(m);
  EXPECT_NE(table.find("shm"), std::string::npos);
  EXPECT_NE(table.find("tcp"), std::string::npos);
  EXPECT_NE(table.find("gamma"), std::string::npos);
}

// --- selection ---

TEST(TunerSelect, BucketsArePowersOfTwo) {
  EXPECT_EQ(tuner::count_bucket_representative(0), 0u);
  EXPECT_EQ(tuner::count_bucket_representative(1), 1u);
  EXPECT_EQ(tuner::count_bucket_representative(1000), 512u);
  EXPECT_EQ(tuner::count_bucket_representative(1024), 1024u);
}

TEST(TunerSelect, BestIsTheFastestApplicableAndTiesGoFirst) {
  tuner::Candidate a{"a", 1, {}}, b{"b", 1, {}}, c{"c", 1, {}};
  a.prediction.applicable = true;
  a.prediction.seconds = 2;
  b.prediction.applicable = false;  // would be fastest, but cannot run
  c.prediction.applicable = true;
  c.prediction.seconds = 2;
  EXPECT_EQ(tuner::Tuner::best({a, b, c}).algorithm, "a");
  c.prediction.seconds = 1;
  EXPECT_EQ(tuner::Tuner::best({a, b, c}).algorithm, "c");
  EXPECT_EQ(tuner::Tuner::best({b}).algorithm, "");
}

TEST(TunerSelect, TheRingWinsNearTiesWithExchangeAlgorithmsOnly) {
  auto cand = [](const char* name, double seconds, int channels = 1) {
    tuner::Candidate c{name, channels, {}};
    c.prediction.applicable = true;
    c.prediction.seconds = seconds;
    return c;
  };
  // Within 5% of halving-doubling or recursive doubling: the ring (its best channel count).
  EXPECT_EQ(tuner::Tuner::best({cand("halving-doubling", 1.00), cand("ring", 1.049)}).algorithm, "ring");
  const auto two = tuner::Tuner::best({cand("ring", 1.06), cand("ring", 1.04, 2), cand("recursive-doubling", 1.0)});
  EXPECT_EQ(two.algorithm, "ring");
  EXPECT_EQ(two.nchannels, 2);
  EXPECT_DOUBLE_EQ(two.predicted_seconds, 1.04);
  // Beyond the margin, or against anything else, the fastest.
  EXPECT_EQ(tuner::Tuner::best({cand("halving-doubling", 1.00), cand("ring", 1.051)}).algorithm, "halving-doubling");
  EXPECT_EQ(tuner::Tuner::best({cand("shm-direct", 1.00), cand("ring", 1.01)}).algorithm, "shm-direct");
  EXPECT_EQ(tuner::Tuner::best({cand("tree", 1.00), cand("ring", 1.01)}).algorithm, "tree");
  // Naive is priced with its root's receives travelling together: no margin, the fastest.
  EXPECT_EQ(tuner::Tuner::best({cand("recursive-doubling", 1.00), cand("naive", 1.003)}).algorithm,
            "recursive-doubling");
  EXPECT_EQ(tuner::Tuner::best({cand("recursive-doubling", 1.00), cand("naive", 0.99)}).algorithm, "naive");
  EXPECT_EQ(tuner::Tuner::best({cand("halving-doubling", 1.00), cand("ring", 1.04), cand("naive", 1.02)}).algorithm,
            "ring");
  EXPECT_EQ(tuner::Tuner::best({cand("tree", 1.00), cand("naive", 1.01)}).algorithm, "tree");
}

// With a large per-message cost, a log-step algorithm wins small messages and the ring wins
// large ones. Needs a log-step AllReduce in the registry.
TEST(TunerSelect, LogStepAlgorithmWinsSmallRingWinsLarge) {
  std::vector<std::string> log_step;
  for (const auto& n : schedule::algorithms_for(OpType::allreduce)) {
    if (n == "tree" || n == "recursive-doubling" || n == "halving-doubling") log_step.push_back(n);
  }
  if (log_step.empty()) GTEST_SKIP() << "no log-step AllReduce registered";
  schedule::Topology topo;
  for (int r = 0; r < 32; ++r) topo.host_of_rank.push_back(r);
  CostModel m = round_model();
  m.tcp = {1e-3, 1e9, 1e9};  // 1 ms per message
  tuner::Tuner t(m, topo, LinkView::Force::none);
  const auto names = detail::candidate_algorithms(OpType::allreduce);
  schedule::CollectiveDesc d;
  d.op = OpType::allreduce;
  d.nranks = 32;
  d.count = 256;
  const auto small = t.choose(d, 4, names);
  EXPECT_NE(small.algorithm, "ring");
  EXPECT_TRUE(std::find(log_step.begin(), log_step.end(), small.algorithm) != log_step.end() ||
              small.algorithm == "hierarchical")
      << small.algorithm;
  // Large messages on 4 hosts of 8 ranks: the ring crosses each NIC once per step, the
  // log-step algorithms' long-distance exchanges put all 8 ranks of a host on its NIC.
  schedule::Topology hosts;
  for (int r = 0; r < 32; ++r) hosts.host_of_rank.push_back(r / 8);
  m.tcp.alpha = 1e-6;
  m.shm = {1e-6, 10e9, 10e9};
  tuner::Tuner fast(m, hosts, LinkView::Force::none);
  std::vector<std::string> ring_and_log_step = log_step;
  ring_and_log_step.insert(ring_and_log_step.begin(), "ring");
  d.count = size_t{1} << 26;  // 256 MiB
  EXPECT_EQ(fast.choose(d, 4, ring_and_log_step, 1).algorithm, "ring");
}

TEST(TunerSelect, ChoiceIsCachedPerBucket) {
  const auto topo = schedule::Topology::single_host(4);
  tuner::Tuner t(round_model(), topo, LinkView::Force::none);
  schedule::CollectiveDesc d;
  d.op = OpType::allreduce;
  d.nranks = 4;
  d.count = 1000;
  const auto names = detail::candidate_algorithms(OpType::allreduce);
  const auto a = t.choose(d, 4, names);
  d.count = 600;  // same bucket [512, 1024)
  const auto b = t.choose(d, 4, names);
  EXPECT_FALSE(a.algorithm.empty());
  EXPECT_EQ(a.algorithm, b.algorithm);
  EXPECT_EQ(a.predicted_seconds, b.predicted_seconds);  // priced once, at 512 elements
  EXPECT_EQ(a.nchannels, 1);  // one host: no channels to spread over
}

// --- HOOP_ALGO ---

TEST(TunerAlgoEnv, PerOpAndGlobalNames) {
  EXPECT_EQ(detail::algorithm_from_text("allreduce:ring,reducescatter:ring", OpType::allreduce), "ring");
  EXPECT_EQ(detail::algorithm_from_text("allreduce:ring,reducescatter:ring", OpType::allgather), "");
  EXPECT_EQ(detail::algorithm_from_text("ring", OpType::allgather), "ring");
  EXPECT_EQ(detail::algorithm_from_text("ring", OpType::barrier), "");  // not a barrier algorithm
  EXPECT_EQ(detail::algorithm_from_text("chain", OpType::broadcast), "chain");
  EXPECT_EQ(detail::algorithm_from_text("chain", OpType::allreduce), "");
  EXPECT_EQ(detail::algorithm_from_text("ring,broadcast:chain", OpType::broadcast), "chain");
  EXPECT_EQ(detail::algorithm_from_text("auto", OpType::allreduce), "");
  EXPECT_EQ(detail::algorithm_from_text("allreduce:auto", OpType::allreduce), "");
}

TEST(TunerAlgoEnv, UnknownNamesListTheRegisteredOnes) {
  try {
    detail::algorithm_from_text("bogus", OpType::allreduce);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    const std::string what = e.what();
    EXPECT_NE(what.find("'bogus'"), std::string::npos) << what;
    for (const auto& name : detail::all_algorithm_names()) EXPECT_NE(what.find(name), std::string::npos) << what;
  }
  try {
    detail::algorithm_from_text("allreduce:chain", OpType::allreduce);  // chain is not an AllReduce
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("'chain' for allreduce"), std::string::npos) << what;
    EXPECT_NE(what.find("ring"), std::string::npos) << what;
  }
  EXPECT_THROW(detail::algorithm_from_text("allsum:ring", OpType::allreduce), Error);
}

}  // namespace
}  // namespace hoop
