// The cost model's processor part: ranks that share a machine's cores (more of them than cores)
// pay the machine's processor time per step, a receive from a peer heard from before, an
// exchange and a forwarded chunk a hand-over per rank of a core, a wait on a peer's flag in
// the shared region one per other rank of a core, a call its skew once; a link
// that takes bursts faster than it sustains holds an operation's bytes to its sustained rate,
// directions taking turns regain only its burst, and a forwarded slice beyond the burst goes at
// the sustained rate; the calibration's arithmetic and fit; and the symmetric forms against
// the full walk under all of it.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <vector>

#include "schedule/schedule_builders.h"
#include "tuner/calibration.h"
#include "tuner/cost_model.h"
#include "tuner/cpu_calibration.h"
#include "tuner/pricing.h"
#include "tuner/predict.h"

namespace hoop {
namespace {

using schedule::Buf;
using schedule::Range;
using schedule::RankSchedule;
using tuner::CostModel;
using tuner::LinkView;

// Round numbers between hosts: 10 us and 1 GB/s; a message costs 3 us of processor at each end,
// a byte 1 ns, a hand-over 2 us.
CostModel round_model(int cores) {
  CostModel m;
  m.shm = {1e-6, 1e9, 1e9};
  m.tcp = {10e-6, 1e9, 1e9};
  m.tcp.cpu = 3e-6;
  m.tcp.cpu_byte = 1e-9;
  m.tcp.handoff = 2e-6;
  m.gamma = 0;
  m.copy = 0;
  m.cores = cores;
  return m;
}

schedule::Topology one_rank_per_host(int n) {
  schedule::Topology t;
  for (int r = 0; r < n; ++r) t.host_of_rank.push_back(r);
  return t;
}

Range elems(size_t n) { return Range{Buf::send, 0, n}; }
Range into(size_t n) { return Range{Buf::recv, 0, n}; }

// One step of a ring of n: send 1000 elements to r+1, receive 1000 from r-1.
std::vector<RankSchedule> ring_step(int n) {
  std::vector<RankSchedule> ranks(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    ranks[static_cast<size_t>(r)].steps.push_back(
        {{schedule::send_to((r + 1) % n, elems(1000)), schedule::recv_copy_from((r + n - 1) % n, into(1000))}});
  }
  return ranks;
}

// Rank 0 sends n elements to rank 1, which forwards each slice to rank 2.
std::vector<RankSchedule> forwarding_chain(size_t n) {
  std::vector<RankSchedule> ranks(3);
  ranks[0].steps.push_back({{schedule::send_to(1, elems(n))}});
  ranks[1].steps.push_back({{schedule::recv_copy_from(0, into(n)), schedule::send_to(2, into(n), 0)}});
  ranks[2].steps.push_back({{schedule::recv_copy_from(1, into(n))}});
  return ranks;
}

TEST(TunerContention, RanksSharingCoresPayTheMachinesProcessorTime) {
  const auto topo = one_rank_per_host(4);
  const std::vector<int> one_machine(4, 0), own_machines = {0, 1, 2, 3};
  // Alone: 10 us + 4000 B at 1 GB/s. Each rank's processor time: two messages of 4000 B, 7 us
  // each; four ranks on two cores: 28 us.
  auto p = tuner::predict_schedules(ring_step(4), 4, LinkView{&topo, LinkView::Force::none, &one_machine},
                                    round_model(2));
  EXPECT_NEAR(p.seconds, 28e-6, 1e-12);
  // Enough cores, separate machines, or a model that does not know the cores: 14 us.
  for (const auto& [machines, cores] : {std::pair{one_machine, 4}, std::pair{own_machines, 2}, std::pair{one_machine, 0}}) {
    p = tuner::predict_schedules(ring_step(4), 4, LinkView{&topo, LinkView::Force::none, &machines},
                                 round_model(cores));
    EXPECT_NEAR(p.seconds, 14e-6, 1e-12) << "cores " << cores;
  }
}

TEST(TunerContention, AnExchangeWaitsOneHandOverPerRankOfACore) {
  const auto topo = one_rank_per_host(2);
  const std::vector<int> one_machine(2, 0);
  // Ranks 0 and 1 send to and receive from each other on one core: 2 x 14 us of processor,
  // and the partner's turn: a hand-over (2 us) per rank of the core.
  const LinkView links{&topo, LinkView::Force::none, &one_machine};
  auto p = tuner::predict_schedules(ring_step(2), 4, links, round_model(1));
  EXPECT_NEAR(p.seconds, 28e-6 + 2 * 2e-6, 1e-12);
  // Two exchanges: the call's skew once, on top.
  CostModel skewed = round_model(1);
  skewed.tcp.skew = 30e-6;
  auto twice = ring_step(2);
  for (auto& r : twice) r.steps.push_back(r.steps.front());
  p = tuner::predict_schedules(twice, 4, links, skewed);
  EXPECT_NEAR(p.seconds, 2 * (28e-6 + 2 * 2e-6) + 30e-6, 1e-12);
  // Each rank on a core of its own: neither hand-over nor skew.
  p = tuner::predict_schedules(twice, 4, links, [&] {
    CostModel m = skewed;
    m.cores = 2;
    return m;
  }());
  EXPECT_NEAR(p.seconds, 2 * 14e-6, 1e-12);
}

// The calibration's fit finds the hand-over and the skew that price a ring and a recursive
// doubling AllReduce of a few bytes at what they took, on 8 hosts of one machine of 2 cores.
TEST(TunerContention, TheContendedStepIsFittedToARingAndARecursiveDoubling) {
  const int n = 8;
  const auto topo = one_rank_per_host(n);
  const std::vector<int> one_machine(n, 0);
  const LinkView links{&topo, LinkView::Force::none, &one_machine};
  schedule::CollectiveDesc d;
  d.count = tuner::contended_fit_count(n);
  d.nranks = n;
  d.topology = &topo;
  CostModel truth = round_model(2);
  truth.tcp.handoff = 5e-6;
  truth.tcp.skew = 90e-6;
  const double ring = tuner::predict("ring", d, 4, links, truth, tuner::Walk::every_rank).seconds;
  const double rd = tuner::predict("recursive-doubling", d, 4, links, truth, tuner::Walk::every_rank).seconds;
  CostModel fitted = round_model(2);
  ASSERT_TRUE(tuner::fit_contended_step(ring, rd, n, fitted));
  EXPECT_NEAR(fitted.tcp.handoff, 5e-6, 1e-12);
  EXPECT_NEAR(fitted.tcp.skew, 90e-6, 1e-12);
  // Recursive doubling as slow as its steps alone allow, the ring slower still: no room for a
  // skew, so none, and the ring's hand-over.
  CostModel no_skew = round_model(2);
  no_skew.tcp.handoff = 0;
  const double rd_bare = tuner::predict("recursive-doubling", d, 4, links, no_skew, tuner::Walk::every_rank).seconds;
  ASSERT_TRUE(tuner::fit_contended_step(ring, rd_bare - 10e-6, n, fitted));
  EXPECT_EQ(fitted.tcp.skew, 0);
  CostModel check = round_model(2);
  check.tcp.handoff = fitted.tcp.handoff;
  EXPECT_NEAR(tuner::predict("ring", d, 4, links, check, tuner::Walk::every_rank).seconds, ring, 1e-12);
  // Ranks that do not outnumber the cores: nothing to fit.
  CostModel roomy = round_model(8);
  EXPECT_FALSE(tuner::fit_contended_step(ring, rd, n, roomy));
  EXPECT_EQ(roomy.tcp.skew, 0);
}

TEST(TunerContention, AReceiveFromAPeerHeardFromBeforeWaitsForItsTurn) {
  const auto topo = one_rank_per_host(4);
  const std::vector<int> one_machine(4, 0);
  // Two ring steps on 2 cores (two ranks per core): the first receives what its predecessor
  // sends at once (28 us of processor, as above); the second waits for the predecessor to have
  // run since: a hand-over (2 us) per rank of a core on top.
  auto ranks = ring_step(4);
  for (int r = 0; r < 4; ++r) {
    ranks[static_cast<size_t>(r)].steps.push_back(
        {{schedule::send_to((r + 1) % 4, elems(1000)), schedule::recv_copy_from((r + 3) % 4, into(1000))}});
  }
  auto p = tuner::predict_schedules(ranks, 4, LinkView{&topo, LinkView::Force::none, &one_machine}, round_model(2));
  EXPECT_NEAR(p.seconds, 28e-6 + 28e-6 + 2 * 2e-6, 1e-12);
  // A root receiving from each peer in a step of its own, each peer sending in its first step:
  // every message could leave at once, so no hand-over, and they travel together: the first
  // step pays the latency (10 + 4 us), the later ones their processor time and bytes (3 + 4 us).
  // Each step costs at least the machine's processor time over 2 cores: the first 3 x 7 us of
  // the peers' sends and the root's 7 us.
  std::vector<RankSchedule> gather(4);
  for (int peer = 1; peer < 4; ++peer) {
    gather[0].steps.push_back({{schedule::recv_copy_from(peer, into(1000))}});
    gather[static_cast<size_t>(peer)].steps.push_back({{schedule::send_to(0, elems(1000))}});
  }
  p = tuner::predict_schedules(gather, 4, LinkView{&topo, LinkView::Force::none, &one_machine}, round_model(2));
  EXPECT_NEAR(p.seconds, std::max(14e-6, (3 * 7e-6 + 7e-6) / 2) + 2 * std::max(7e-6, 7e-6 / 2), 1e-12);
}

TEST(TunerContention, OnlyMessagesSentAtTheStartTravelWhileTheFirstIsWaitedFor) {
  const auto topo = one_rank_per_host(3);
  const std::vector<int> own_machines = {0, 1, 2};
  // Rank 0 takes one message from rank 1 and then one from rank 2, each sent at once: 14 us,
  // then 7 (the second travelled during the first).
  std::vector<RankSchedule> at_once(3);
  for (int peer = 1; peer < 3; ++peer) {
    at_once[0].steps.push_back({{schedule::recv_copy_from(peer, into(1000))}});
    at_once[static_cast<size_t>(peer)].steps.push_back({{schedule::send_to(0, elems(1000))}});
  }
  const auto views = LinkView{&topo, LinkView::Force::none, &own_machines};
  EXPECT_NEAR(tuner::predict_schedules(at_once, 4, views, round_model(0)).seconds, 14e-6 + 7e-6, 1e-12);
  // Rank 2 sends its message in its second step, after taking one from rank 1: it leaves
  // late, and rank 0's second step pays its latency again (each rank's steps are priced one
  // after another, as if all ranks were in the same step at once).
  std::vector<RankSchedule> late = at_once;
  late[1].steps[0].actions.push_back(schedule::send_to(2, elems(1000)));
  late[2].steps.insert(late[2].steps.begin(), {{schedule::recv_copy_from(1, into(1000))}});
  EXPECT_NEAR(tuner::predict_schedules(late, 4, views, round_model(0)).seconds, 14e-6 + 14e-6, 1e-12);
}

TEST(TunerContention, AForwardedChunkWaitsForItsForwardersTurn) {
  // Rank 0 sends 4 MiB to rank 1, which forwards each slice to rank 2 (three hosts, one machine).
  const auto topo = one_rank_per_host(3);
  const std::vector<int> one_machine(3, 0), own_machines = {0, 1, 2};
  const auto ranks = forwarding_chain(1 << 20);
  CostModel m = round_model(1);
  m.tcp.cpu_byte = 0;
  const auto shared = tuner::predict_schedules(ranks, 4, LinkView{&topo, LinkView::Force::none, &one_machine}, m);
  const auto alone = tuner::predict_schedules(ranks, 4, LinkView{&topo, LinkView::Force::none, &own_machines}, m);
  // The step itself is the transfer either way; the hop through rank 1 waits for its turn:
  // a hand-over per rank of the core (three ranks, one core).
  EXPECT_EQ(shared.critical_rank, 2);
  EXPECT_NEAR(shared.seconds - alone.seconds, 3 * 2e-6, 1e-12);
}

TEST(TunerContention, ALinkTakingBurstsIsHeldToItsSustainedRate) {
  const auto topo = one_rank_per_host(2);
  const LinkView links{&topo, LinkView::Force::none};
  RankSchedule a, b;
  for (int k = 0; k < 3; ++k) {
    a.steps.push_back({{schedule::send_to(1, elems(1000))}});
    b.steps.push_back({{schedule::recv_copy_from(0, into(1000))}});
  }
  CostModel m = round_model(0);
  EXPECT_NEAR(tuner::predict_schedules({a, b}, 4, links, m).seconds, 3 * 14e-6, 1e-12);
  // 12000 B through a link that sustains 100 MB/s: 120 us, however fast each step went.
  m.tcp.sustained = 1e8;
  EXPECT_NEAR(tuner::predict_schedules({a, b}, 4, links, m).seconds, 120e-6, 1e-12);
}

// A host whose two directions take turns (receive everything, then send it all) regains only
// the link's burst while one of them waits; an exchange keeps both busy and regains nothing.
TEST(TunerContention, DirectionsTakingTurnsRegainOnlyTheBurst) {
  const auto topo = one_rank_per_host(2);
  const LinkView links{&topo, LinkView::Force::none};
  RankSchedule a, b;
  a.steps.push_back({{schedule::recv_copy_from(1, into(1000))}});
  a.steps.push_back({{schedule::send_to(1, elems(1000))}});
  b.steps.push_back({{schedule::send_to(0, elems(1000))}});
  b.steps.push_back({{schedule::recv_copy_from(0, into(1000))}});
  CostModel m = round_model(0);
  m.tcp.sustained = 1e8;
  // Burst not measured: the directions overlap, 4000 B each way at 100 MB/s.
  EXPECT_NEAR(tuner::predict_schedules({a, b}, 4, links, m).seconds, 40e-6, 1e-12);
  // A 1000 B burst: each direction regains 1000 B while the other works; 8000 - 2000 B in turn.
  m.tcp.burst = 1000;
  EXPECT_NEAR(tuner::predict_schedules({a, b}, 4, links, m).seconds, 60e-6, 1e-12);
  // A burst as large as a direction's bytes: they overlap again.
  m.tcp.burst = 4000;
  EXPECT_NEAR(tuner::predict_schedules({a, b}, 4, links, m).seconds, 40e-6, 1e-12);
  // Three steps of an exchange: 12000 B each way, whatever the burst.
  RankSchedule x, y;
  for (int k = 0; k < 3; ++k) {
    x.steps.push_back({{schedule::send_to(1, elems(1000)), schedule::recv_copy_from(1, into(1000))}});
    y.steps.push_back({{schedule::send_to(0, elems(1000)), schedule::recv_copy_from(0, into(1000))}});
  }
  m.tcp.burst = 1000;
  EXPECT_NEAR(tuner::predict_schedules({x, y}, 4, links, m).seconds, 120e-6, 1e-12);
}

// A forwarded slice over a shaped link: only the link's burst goes at the burst rate, the rest
// of the slice at the sustained rate (the lab at 200 Mbit/s: a 128 KiB chunk of the tree
// through a 64-92 KB bucket).
TEST(TunerContention, AForwardedSliceBeyondTheBurstGoesAtTheSustainedRate) {
  const auto topo = one_rank_per_host(3);
  const LinkView links{&topo, LinkView::Force::none};
  const auto chain = forwarding_chain(65536);  // 256 KiB of f32: one slice
  CostModel m = round_model(0);
  m.tcp.sustained = 5e8;
  const double unmeasured = tuner::predict_schedules(chain, 4, links, m).seconds;
  m.tcp.burst = 262144;  // the whole slice rides the burst
  EXPECT_NEAR(tuner::predict_schedules(chain, 4, links, m).seconds, unmeasured, 1e-12);
  m.tcp.burst = 65536;  // 192 KiB of it at 500 MB/s instead of 1 GB/s: 196.6 us more
  EXPECT_NEAR(tuner::predict_schedules(chain, 4, links, m).seconds - unmeasured, 196608e-9, 1e-12);
}

// The burst from a message sent in its turn (a half trip of a large ping-pong).
TEST(TunerContention, CalibrationTellsTheBurstFromATurn) {
  const double latency = 40e-6, burst_rate = 1.5e9, sustained = 1.25e8;
  const size_t bytes = 1 << 20;
  auto first = [&](double burst) {
    return latency + burst / burst_rate + (static_cast<double>(bytes) - burst) / sustained;
  };
  EXPECT_NEAR(tuner::burst_from_turn(bytes, first(250000), latency, burst_rate, sustained), 250000, 1e-3);
  // All of it rode the burst: at least the message.
  EXPECT_EQ(tuner::burst_from_turn(bytes, latency + 1e-6, latency, burst_rate, sustained),
            static_cast<double>(bytes));
  // Slower than the sustained rate (a busy machine): a packet, never 0 (unmeasured).
  EXPECT_EQ(tuner::burst_from_turn(bytes, first(0) * 2, latency, burst_rate, sustained), 1500);
}

TEST(TunerContention, FurtherMessagesCostTheirProcessorTimeOnceMeasured) {
  const auto topo = one_rank_per_host(3);
  const LinkView links{&topo, LinkView::Force::none};
  std::vector<RankSchedule> ranks(3);
  ranks[0].steps.push_back({{schedule::send_to(1, elems(1000)), schedule::send_to(2, elems(1000))}});
  ranks[1].steps.push_back({{schedule::recv_copy_from(0, into(1000))}});
  ranks[2].steps.push_back({{schedule::recv_copy_from(0, into(1000))}});
  // Rank 0's endpoint: alpha, the second message's 3 us, 8000 B at 1 GB/s.
  EXPECT_NEAR(tuner::predict_schedules(ranks, 4, links, round_model(0)).seconds, 10e-6 + 3e-6 + 8e-6, 1e-12);
}

TEST(TunerContention, ModelJsonKeepsTheProcessorPart) {
  CostModel m = round_model(6);
  m.tcp.skew = 90e-6;
  m.tcp.sustained = 1.25e8;
  m.tcp.burst = 250000;
  const CostModel back = tuner::model_from_json(tuner::to_json(m));
  EXPECT_EQ(back.tcp.cpu, m.tcp.cpu);
  EXPECT_EQ(back.tcp.cpu_byte, m.tcp.cpu_byte);
  EXPECT_EQ(back.tcp.handoff, m.tcp.handoff);
  EXPECT_EQ(back.tcp.sustained, m.tcp.sustained);
  EXPECT_EQ(back.tcp.burst, m.tcp.burst);
  EXPECT_EQ(back.tcp.skew, m.tcp.skew);
  EXPECT_EQ(back.cores, 6);
  // A model written before these fields: unknown, hence not priced.
  const CostModel old = tuner::model_from_json(R"({"tcp": {"alpha_s": 1e-5, "beta_Bps": 1e9}})");
  EXPECT_EQ(old.tcp.cpu, 0);
  EXPECT_EQ(old.tcp.sustained, 0);
  EXPECT_EQ(old.tcp.burst, 0);
  EXPECT_EQ(old.tcp.skew, 0);
  EXPECT_EQ(old.tcp.sustained_rate(), 1e9);
  EXPECT_EQ(old.cores, 0);
  EXPECT_NE(tuner::to_table(m).find("cores 6"), std::string::npos);
}

TEST(TunerContention, CalibrationRoundsGiveTheThreeFigures) {
  // A round of k messages of b bytes each way on one core: 4k ends at cpu + b * cpu_byte, and
  // two hand-overs.
  const double cpu = 5e-6, per_byte = 1e-9, handoff = 3e-6;
  auto round = [&](int k, size_t b) { return 4.0 * k * (cpu + static_cast<double>(b) * per_byte) + 2 * handoff; };
  tuner::LinkCost l;
  ASSERT_TRUE(tuner::processor_costs_from_rounds(round(1, 8), round(8, 8), round(8, 4096), 8, 4096, l));
  EXPECT_NEAR(l.cpu, cpu + 8 * per_byte, 1e-12);
  EXPECT_NEAR(l.cpu_byte, per_byte, 1e-15);
  EXPECT_NEAR(l.handoff, handoff, 1e-12);
  // Eight messages no slower than one: noise, nothing to learn.
  tuner::LinkCost untouched;
  EXPECT_FALSE(tuner::processor_costs_from_rounds(round(8, 8), round(1, 8), round(8, 4096), 8, 4096, untouched));
  EXPECT_EQ(untouched.cpu, 0);
}

// shm-direct's steps wait on a peer's flag in the shared region: on a contended machine that
// peer must have run since, as for a chained receive, but the waiter gives its core away at
// once, so such a step pays a hand-over per other rank of a core (one where two ranks share a
// core, three where four do); a step of the rank's own work alone (publishing) does not.
TEST(TunerContention, AWaitOnAPeersFlagPaysAHandOverPerOtherRankOfACore) {
  for (const int n : {4, 8}) {
    schedule::Topology topo;
    topo.host_of_rank.assign(static_cast<size_t>(n), 0);
    const std::vector<int> one_machine(static_cast<size_t>(n), 0);
    const LinkView links{&topo, LinkView::Force::none, &one_machine};
    std::vector<RankSchedule> ranks(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
      auto& steps = ranks[static_cast<size_t>(r)].steps;
      steps.push_back({{schedule::publish()}});
      steps.push_back({{schedule::wait_flag((r + 1) % n, 1)}});
      steps.push_back({{schedule::wait_flag((r + n - 1) % n, 2)}});
    }
    CostModel m = round_model(2);
    m.shm.handoff = 0;
    const double without = tuner::predict_schedules(ranks, n, links, m).seconds;
    m.shm.handoff = 2e-6;
    // Two steps wait on a flag, each n / 2 - 1 hand-overs of 2 us.
    EXPECT_NEAR(tuner::predict_schedules(ranks, n, links, m).seconds - without, 2 * (n / 2 - 1) * 2e-6, 1e-12) << n;
    // Cores enough for every rank: no hand-over.
    EXPECT_NEAR(tuner::predict_schedules(ranks, n, links, round_model(n)).seconds,
                tuner::predict_schedules(ranks, n, links, [&] { CostModel u = round_model(n); u.shm.handoff = 2e-6; return u; }()).seconds,
                1e-12)
        << n;
  }
}

// A Broadcast's chain back to back on 8 ranks of one host of 2 cores: while the ring holds many
// calls' messages, each message end costs the processor a copy through memory, so the machine's
// processor time per call is its 14 message ends at that rate, not at cpu_byte (fitted to 4 KiB
// round trips: on a 2-core EPYC VM 0.24 ns a byte, where the chain measured 49 us a call at
// 64 KiB and a copy through memory 13 GB/s).
TEST(TunerContention, AStreamThroughARingThatRunsAheadCopiesThroughMemory) {
  const auto host = schedule::Topology::single_host(8);
  const std::vector<int> one_machine(8, 0);
  const LinkView links{&host, LinkView::Force::none, &one_machine};
  CostModel m = round_model(2);
  m.shm = {1e-6, 8e9, 8e9};
  m.shm.cpu = 3e-6;
  m.shm.cpu_byte = 0.24e-9;
  m.shm.handoff = 17e-6;
  m.copy = 0.02e-9;
  m.memory_copy = 0.075e-9;
  m.shm_ring_bytes = 4 << 20;
  schedule::CollectiveDesc d;
  d.op = OpType::broadcast;
  d.count = 16384;  // 64 KiB of f32
  d.nranks = 8;
  d.topology = &host;
  const double bytes = 65536;
  const auto ahead = tuner::predict("chain", d, 4, links, m);
  ASSERT_TRUE(ahead.applicable) << ahead.why_not;
  // The 14 message ends and the root's copy of its input into its output (out of place).
  EXPECT_NEAR(ahead.seconds, (14 * (m.shm.cpu + bytes * m.memory_copy) + bytes * m.copy) / 2, 1e-12);
  // A ring of 512 KiB holds 8 such messages: the copies cost cpu_byte and the hops show.
  m.shm_ring_bytes = 512 << 10;
  const auto behind = tuner::predict("chain", d, 4, links, m);
  EXPECT_GT(behind.seconds, 14 * (m.shm.cpu + bytes * m.shm.cpu_byte) / 2);
  // No copy through memory measured (a model of an older calibration): cpu_byte, as before.
  m.shm_ring_bytes = 4 << 20;
  m.memory_copy = 0;
  const auto unmeasured = tuner::predict("chain", d, 4, links, m);
  EXPECT_NEAR(unmeasured.seconds, (14 * (m.shm.cpu + bytes * m.shm.cpu_byte) + bytes * m.copy) / 2, 1e-12);
}

// The ring's and the hierarchical forms price ranks sharing a machine as the walk does, within 1%.
TEST(TunerContention, SymmetricFormsMatchTheFullWalk) {
  CostModel m = round_model(2);
  m.shm.cpu = 1e-6;
  m.shm.cpu_byte = 0.2e-9;
  m.shm.handoff = 0.5e-6;
  m.shm.skew = 5e-6;
  m.tcp.skew = 20e-6;
  m.tcp.sustained = 4e8;
  m.tcp.burst = 65536;  // less than a slice: forwarded slices and turns would tell
  m.gamma = 1e-10;
  for (int n : {2, 3, 4, 8, 12, 16}) {
    for (int per_host : {1, 2, 4}) {
      schedule::Topology topo;
      for (int r = 0; r < n; ++r) topo.host_of_rank.push_back(r / per_host);
      // Every host on one machine (a lab), or two hosts per machine.
      for (int hosts_per_machine : {n, 2}) {
        std::vector<int> machines;
        for (int r = 0; r < n; ++r) machines.push_back(r / per_host / hosts_per_machine);
        const LinkView links{&topo, LinkView::Force::none, &machines};
        for (const char* name : {"ring", "hierarchical"}) {
          for (size_t count : {size_t{1}, size_t{12347}, size_t{1} << 20}) {
            schedule::CollectiveDesc d;
            d.op = OpType::allreduce;
            d.count = count;
            d.nranks = n;
            d.topology = &topo;
            const std::string what = fmt::format("{} N={} per_host={} hosts_per_machine={} count={}", name, n,
                                                 per_host, hosts_per_machine, count);
            const auto f = tuner::price(tuner::Pricing::symmetric, name, d, 4, links, m);
            const auto e = tuner::price(tuner::Pricing::full_walk, name, d, 4, links, m);
            ASSERT_EQ(f.applicable, e.applicable) << what;
            if (!e.applicable) continue;
            EXPECT_NEAR(f.seconds, e.seconds, 0.01 * e.seconds) << what;
            EXPECT_EQ(f.steps, e.steps) << what;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace hoop
