// One phase of a ring (ReduceScatter or AllGather around it) priced for one rank, run by run:
// the piece the ring's and the hierarchical algorithm's symmetric forms are made of.
#pragma once

#include <cstddef>
#include <vector>

#include "tuner/cost_model.h"
#include "tuner/predict.h"
#include "tuner/step_cost.h"

namespace hoop::tuner {

inline int ring_wrap(long long x, int n) { return static_cast<int>(((x % n) + n) % n); }

// The chunks of one channel's part around a ring of N: Chunking{count, N} (base elements, the
// first `rem` one more), or N equal blocks (rem 0).
struct PartChunks {
  size_t base = 0, rem = 0;
  double elements(int chunk) const { return static_cast<double>(base + (static_cast<size_t>(chunk) < rem ? 1 : 0)); }
};

// `steps` steps; at step k the rank at position m sends chunk m + send_off - k to m+1 and
// receives chunk m + recv_off - k from m-1 (reducing it or not); step 0 may carry local work.
struct Phase {
  int steps = 0;
  int send_off = 0, recv_off = 0;
  bool reduce = false;
  double first_step_local = 0;  // seconds, on step 0 only
  // The ring's first phase: its first step receives from a peer not heard from before, whose
  // message needs no hand-over on a contended machine (unless the two exchange: n == 2).
  bool first_contact = false;
};

// A rank at position `pos` of a ring of `n`, the classes of its two links, the chunks of each
// channel, and the positions of its host's ranks whose send (receive) crosses to another host
// in the same step; their bytes times host_scale are the host's NIC traffic.
struct RingView {
  int n = 0;
  int pos = 0;
  LinkClass out_cls = LinkClass::shm, in_cls = LinkClass::shm;
  const std::vector<PartChunks>* parts = nullptr;
  const std::vector<int>* host_senders = nullptr;
  const std::vector<int>* host_receivers = nullptr;
  double host_scale = 1;
  // When the rank's machine is contended: how, and its ranks, all in the same phase, each moving
  // about this rank's bytes at its own classes' costs: in one step and channel, the processor
  // time of their messages (cpu, out and in), and the sums of their cpu_byte out and in.
  Contention contention;
  double machine_ranks = 0;
  double machine_message_cpu = 0;
  double machine_out_byte_cpu = 0, machine_in_byte_cpu = 0;
};

struct RankTotals {
  double seconds = 0;
  size_t steps = 0;
  double sent = 0;
  std::vector<double> per_channel_out, per_channel_in;
  double host_tcp_out = 0, host_tcp_in = 0;
  double skew = 0;  // the call's skew where the rank's machine is contended (LinkCost::skew)
  explicit RankTotals(size_t channels) : per_channel_out(channels, 0), per_channel_in(channels, 0) {}
};

// Adds the rank's totals to the prediction (the slowest rank, the most bytes), its time at
// least its host's tcp bytes over what the link sustains (CostModel's sustained rate), plus
// its skew.
void fold_rank(const RankTotals& t, int rank, Prediction& pred, const CostModel& m);

void add_ring_phase(const RingView& v, const Phase& ph, double elem_bytes, const CostModel& m, RankTotals& t);

}  // namespace hoop::tuner
