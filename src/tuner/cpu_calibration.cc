#include "tuner/cpu_calibration.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "tuner/predict.h"

namespace hoop::tuner {

namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kSmall = 8;
constexpr size_t kLarge = 4096;
constexpr int kBurst = 8;
constexpr int kWarmup = 2;
constexpr int kRounds = 16;

// One round of `k` messages of `bytes` each way (rank 0 sends first), in seconds. Over a shaped
// link (rank 0 knows its sustained rate) rank 0 first lets the token buckets refill for the
// round's bytes: rounds back to back would be held to the link's rate, and that time taken for
// the processor's.
double round_seconds(Communicator& comm, int partner, int k, size_t bytes, double sustained, std::vector<uint8_t>& buf) {
  const bool root = comm.rank() == 0;
  const auto refill = std::chrono::duration<double>(
      sustained > 0 ? 1.5 * static_cast<double>(k) * static_cast<double>(bytes) / sustained : 0.0);
  if (root && refill.count() > 0) std::this_thread::sleep_for(refill);
  const auto t0 = Clock::now();
  if (root) {
    for (int j = 0; j < k; ++j) comm.send(buf.data(), bytes, DataType::u8, partner);
    for (int j = 0; j < k; ++j) comm.recv(buf.data(), bytes, DataType::u8, partner);
  } else {
    for (int j = 0; j < k; ++j) comm.recv(buf.data(), bytes, DataType::u8, 0);
    for (int j = 0; j < k; ++j) comm.send(buf.data(), bytes, DataType::u8, 0);
  }
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The fastest of kRounds rounds of each kind: 1 and kBurst messages of kSmall bytes, kBurst of
// kLarge. The kinds take turns, so a slow spell of a few milliseconds slows some rounds of
// each rather than all of one: run back to back, the rounds of one message took 15-18 us in
// some calibrations of the lab and 26-33 in others (and both in one calibration, timed twice),
// which made `handoff` 3 or 12 us from run to run.
std::array<double, 3> fastest_rounds(Communicator& comm, int partner, double sustained, std::vector<uint8_t>& buf) {
  constexpr int kKind[3] = {1, kBurst, kBurst};
  constexpr size_t kBytes[3] = {kSmall, kSmall, kLarge};
  std::array<double, 3> best{1e30, 1e30, 1e30};
  for (int i = 0; i < kWarmup + kRounds; ++i) {
    for (size_t j = 0; j < best.size(); ++j) {
      const double t = round_seconds(comm, partner, kKind[j], kBytes[j], sustained, buf);
      if (i >= kWarmup) best[j] = std::min(best[j], t);
    }
  }
  return best;
}

// Pins the calling thread to `cpu`, keeping its former set in `old`.
bool pin_to(int cpu, cpu_set_t& old) {
  if (cpu < 0 || cpu >= CPU_SETSIZE || ::sched_getaffinity(0, sizeof old, &old) != 0) return false;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  return ::sched_setaffinity(0, sizeof one, &one) == 0;
}

// allreduce_call_seconds: blocks per algorithm, untimed calls opening each, calls timed.
constexpr int kFitBlocks = 6;
constexpr int kFitWarmupCalls = 2;  // per block
constexpr int kFitCallsPerBlock = 20;
constexpr int kFitCalls = kFitBlocks * kFitCallsPerBlock;  // per algorithm

}  // namespace

std::array<double, 2> allreduce_call_seconds(Communicator& comm, const std::array<const char*, 2>& algos) {
  const size_t count = contended_fit_count(comm.size());
  std::vector<float> in(count, 1.0f), out(count);
  std::array<OpOptions, 2> forced;
  for (size_t a = 0; a < algos.size(); ++a) forced[a].algo = algos[a];
  auto call = [&](size_t a) { comm.allreduce(in.data(), out.data(), count, DataType::f32, RedOp::sum, forced[a]); };
  // Blocks of calls taking turns, as measure_processor's rounds do, so that a slow spell slows
  // some calls of each; within a block, calls of one algorithm back to back as an application's
  // (alternating call by call on the lab's 8 ranks of 2 cores, recursive doubling took 255-282
  // us a call against 203-242 back to back, and the fit gave half the hand-over and 1.6x the
  // skew).
  std::vector<double> times(2 * kFitCalls);
  for (int b = 0; b < kFitBlocks; ++b) {
    for (size_t a = 0; a < algos.size(); ++a) {
      for (int k = 0; k < kFitWarmupCalls; ++k) call(a);
      for (int k = 0; k < kFitCallsPerBlock; ++k) {
        const auto t0 = Clock::now();
        call(a);
        times[a * kFitCalls + static_cast<size_t>(b * kFitCallsPerBlock + k)] =
            std::chrono::duration<double>(Clock::now() - t0).count();
      }
    }
  }
  comm.allreduce(times.data(), times.data(), times.size(), DataType::f64, RedOp::max);
  std::array<double, 2> median{};
  for (size_t a = 0; a < algos.size(); ++a) {
    const auto first = times.begin() + static_cast<std::ptrdiff_t>(a * kFitCalls);
    std::nth_element(first, first + kFitCalls / 2, first + kFitCalls);
    median[a] = first[kFitCalls / 2];
  }
  return median;
}

bool fit_contended_step(double ring_call, double rd_call, int nranks, CostModel& m) {
  if (m.cores <= 0 || nranks <= m.cores) return false;
  schedule::Topology hosts;
  for (int r = 0; r < nranks; ++r) hosts.host_of_rank.push_back(r);
  const std::vector<int> one_machine(static_cast<size_t>(nranks), 0);
  LinkView links;
  links.topology = &hosts;
  links.machine_of_rank = &one_machine;
  schedule::CollectiveDesc d;
  d.op = OpType::allreduce;
  d.count = contended_fit_count(nranks);
  d.nranks = nranks;
  d.topology = &hosts;
  // The model is linear in both: a price at no hand-over and no skew, and what a second of
  // hand-over adds.
  CostModel probe = m;
  probe.tcp.skew = 0;
  auto price = [&](const char* algo, double handoff) {
    probe.tcp.handoff = handoff;
    const Prediction p = predict(algo, d, sizeof(float), links, probe, Walk::every_rank);
    return p.applicable ? p.seconds : -1.0;
  };
  constexpr double kUnit = 1e-6;
  const double ring0 = price("ring", 0), rd0 = price("recursive-doubling", 0);
  const double ring_per = (price("ring", kUnit) - ring0) / kUnit;
  const double rd_per = (price("recursive-doubling", kUnit) - rd0) / kUnit;
  if (ring0 < 0 || rd0 < 0 || !(ring_per > rd_per)) return false;
  double handoff = ((ring_call - ring0) - (rd_call - rd0)) / (ring_per - rd_per);
  double skew = rd_call - rd0 - rd_per * handoff;
  if (handoff < 0 || skew < 0) {
    // Noise beyond what the two can tell apart: the ring's steps alone.
    skew = 0;
    handoff = std::max(0.0, (ring_call - ring0) / ring_per);
  }
  m.tcp.handoff = handoff;
  m.tcp.skew = skew;
  return true;
}

int machine_cores() {
  const long n = ::sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 0;
}

bool processor_costs_from_rounds(double one_small, double eight_small, double eight_large, size_t small, size_t large,
                                 LinkCost& l) {
  // round(k, b) = 4k * (cpu + b * cpu_byte) + 2 * handoff
  const double per_end = (eight_small - one_small) / (4.0 * (kBurst - 1));
  if (!(per_end > 0)) return false;
  const double per_byte = (eight_large - eight_small) / (4.0 * kBurst * static_cast<double>(large - small));
  l.cpu = per_end;
  l.cpu_byte = std::max(0.0, per_byte);
  l.handoff = std::max(0.0, (one_small - 4.0 * per_end) / 2);
  return true;
}

void measure_processor(Communicator& comm, int partner, LinkCost& l) {
  const bool root = comm.rank() == 0;
  cpu_set_t old;
  bool pinned = false;
  int32_t cpu = -1;
  if (root) {
    const int here = ::sched_getcpu();
    pinned = pin_to(here, old);
    if (pinned) cpu = here;
  }
  // Rank 0 offers its core; the partner says whether it could join it.
  int32_t joined = 0;
  if (root) {
    comm.send(&cpu, 1, DataType::i32, partner);
    comm.recv(&joined, 1, DataType::i32, partner);
  } else {
    comm.recv(&cpu, 1, DataType::i32, 0);
    pinned = cpu >= 0 && pin_to(cpu, old);
    joined = pinned ? 1 : 0;
    comm.send(&joined, 1, DataType::i32, 0);
  }
  double one_small = 0, eight_small = 0, eight_large = 0;
  if (joined) {
    std::vector<uint8_t> buf(kLarge, 1);
    const std::array<double, 3> best = fastest_rounds(comm, partner, l.sustained, buf);
    one_small = best[0];
    eight_small = best[1];
    eight_large = best[2];
  }
  if (pinned) ::sched_setaffinity(0, sizeof old, &old);
  if (root && joined) {
    LinkCost measured = l;
    if (processor_costs_from_rounds(one_small, eight_small, eight_large, kSmall, kLarge, measured)) l = measured;
  }
}

}  // namespace hoop::tuner
