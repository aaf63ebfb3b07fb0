// Hierarchical AllReduce over hosts (desc.topology; null means one host):
//   A. inside each host, ring ReduceScatter among its ranks over shared memory: local rank i
//      ends owning slice (i+1) mod S of the host's partial sum (S slices, Chunking{n, S});
//   B. for each slice, a ring AllReduce across hosts among the ranks owning that slice
//      (local rank i of every host), on n/S elements;
//   C. inside each host, ring AllGather of the slices.
// Each element is reduced once per level and then copied, so all ranks get the same bits.
//
// Hosts with different numbers of ranks: S = the smallest host's rank count. On every host the
// first S ranks (in rank order) take part in A-C; local rank j >= S hands its vector to local
// rank j mod S before A (one step per such rank, reduced in turn) and receives the result
// after C. With equal hosts nobody hands over; with one host it is the ring AllReduce.
//
// Cost for n elements, H hosts of L ranks (alpha/beta per transport, gamma per element):
//   steps 2(L-1) intra + 2(H-1) inter; per rank sends 2 n (L-1)/L over shared memory and
//   2 n (H-1)/(H L) over the network:
//   2(L-1) alpha_shm + 2 n (L-1)/L beta_shm + 2(H-1) alpha_net + 2 n (H-1)/(H L) beta_net
//   + n ((L-1)/L + (H-1)/(H L)) gamma.
// Uneven hosts: L becomes S, plus one step and n elements per extra rank each way.
//
// Through the hosts' leaders ("leaders", for small vectors on hosts of several ranks): every
// rank of a host sends its vector to the host's first rank (its leader), which reduces them in
// rank order, one receive per step; the leaders AllReduce across hosts by recursive doubling
// (recursive_doubling.cc: canonical operand order, every leader ends with the same bits); each
// leader sends the result to its host's ranks. Three dependent hand-overs for a host's ranks
// where the ring decomposition above takes 2(L-1) + 2(H-1), and a host's link carries n log2 H
// each way (n per level) against 2 n (H-1)/H; its leader moves 2 n (L-1) over shared memory.
//   (L-1)(alpha_shm + n beta_shm + n gamma) + log2(H)(alpha_net + n beta_net + n gamma)
//   + alpha_shm + (L-1) n beta_shm.
#include <algorithm>

#include <fmt/format.h>

#include "core/errors.h"
#include "schedule/fold.h"

namespace hoop::schedule {

namespace {

// Appends `sub` (a schedule among members[0..m-1]) to `out`: peers become real ranks, the
// send buffer is read from `input`, ranges move by `offset`, transfers of nothing are dropped.
void append_mapped(RankSchedule& out, const RankSchedule& sub, const std::vector<int>& members,
                   Buf input, size_t offset) {
  auto map = [&](Range r) {
    if (r.buf == Buf::send) r.buf = input;
    r.offset += offset;
    return r;
  };
  for (const Step& step : sub.steps) {
    Step mapped;
    std::vector<int> index(step.actions.size(), -1);
    for (size_t i = 0; i < step.actions.size(); ++i) {
      Action a = step.actions[i];
      const bool transfer = a.kind == ActionKind::send || a.kind == ActionKind::recv_copy ||
                            a.kind == ActionKind::recv_reduce;
      const size_t moved = a.kind == ActionKind::send ? a.src.count : a.dst.count;
      if (transfer && moved == 0) continue;
      if (a.peer >= 0) a.peer = members.at(static_cast<size_t>(a.peer));
      a.src = map(a.src);
      a.dst = map(a.dst);
      if (a.after >= 0) a.after = index[static_cast<size_t>(a.after)];
      index[i] = static_cast<int>(mapped.actions.size());
      mapped.actions.push_back(a);
    }
    add_step(out, std::move(mapped));
  }
}

// Every host's ranks, in rank order, and the host of `r`; desc.topology null means one host.
struct Hosts {
  std::vector<std::vector<int>> members;
  int of_rank = 0;
};

Hosts hosts_of(const CollectiveDesc& d, int r, const char* algorithm) {
  const Topology topo = d.topology ? *d.topology : Topology::single_host(d.nranks);
  if (topo.host_of_rank.size() != static_cast<size_t>(d.nranks)) {
    throw_error(ErrorCode::internal, fmt::format("{}: topology of {} ranks for {} ranks", algorithm,
                                                 topo.host_of_rank.size(), d.nranks));
  }
  // Every host's ranks in one pass (ranks_of_host per host would cost N per host: at 65,536
  // ranks on 8,192 hosts that is most of the time of a schedule).
  Hosts h;
  h.members.resize(static_cast<size_t>(topo.nhosts()));
  for (int q = 0; q < d.nranks; ++q) {
    h.members[static_cast<size_t>(topo.host_of_rank[static_cast<size_t>(q)])].push_back(q);
  }
  h.of_rank = topo.host_of_rank[static_cast<size_t>(r)];
  return h;
}

}  // namespace

RankSchedule hierarchical_allreduce(const CollectiveDesc& d, int r) {
  RankSchedule s;
  s.algorithm = "hierarchical";
  const size_t count = d.count;
  const Range all_in{Buf::send, 0, count}, all_out{Buf::recv, 0, count};
  if (count == 0) return s;
  const Hosts grouped = hosts_of(d, r, "hierarchical");
  const std::vector<std::vector<int>>& hosts = grouped.members;
  const int nhosts = static_cast<int>(hosts.size());
  const int host = grouped.of_rank;
  int S = d.nranks;
  for (const auto& members : hosts) S = std::min(S, static_cast<int>(members.size()));
  const std::vector<int>& local = hosts[static_cast<size_t>(host)];
  const int L = static_cast<int>(local.size());
  const int i = static_cast<int>(std::find(local.begin(), local.end(), r) - local.begin());

  if (i >= S) {  // an extra rank of a bigger host
    const int active = local[static_cast<size_t>(i % S)];
    s.steps.push_back({{send_to(active, all_in)}});
    s.steps.push_back({{recv_copy_from(active, all_out)}});
    return s;
  }
  std::vector<int> extras;
  for (int j = i + S; j < L; j += S) extras.push_back(local[static_cast<size_t>(j)]);
  bool in_recv = d.in_place;  // is this rank's vector in recv (else in send)?
  for (int extra : extras) {
    s.steps.push_back({{recv_reduce_from(extra, in_recv ? all_out : all_in, all_out)}});
    in_recv = true;
  }
  if (!in_recv && S == 1) {
    s.steps.push_back({{local_copy(all_in, all_out)}});
    in_recv = true;
  }
  const std::vector<int> actives(local.begin(), local.begin() + S);
  CollectiveDesc sub;
  sub.op = OpType::allreduce;
  sub.redop = RedOp::sum;  // the average's division is done once, below
  // A: ReduceScatter inside the host.
  if (S > 1) {
    sub.count = count;
    sub.nranks = S;
    sub.in_place = in_recv;
    append_mapped(s, ring_allreduce(sub, i, RingPhases::reduce_scatter_only), actives,
                  in_recv ? Buf::recv : Buf::send, 0);
  }
  const Chunking slices{count, S};
  const int owned = S > 1 ? ring_allreduce_owned_chunk(i, S) : 0;
  const Range slice{Buf::recv, slices.offset(owned), slices.size(owned)};
  // B: AllReduce of the owned slice across hosts, among the ranks of local index i.
  if (nhosts > 1) {
    std::vector<int> peers;
    for (const auto& h : hosts) peers.push_back(h[static_cast<size_t>(i)]);
    sub.count = slice.count;
    sub.nranks = nhosts;
    sub.in_place = true;
    append_mapped(s, ring_allreduce(sub, host), peers, Buf::recv, slice.offset);
  }
  if (d.redop == RedOp::avg && d.nranks > 1 && slice.count > 0) s.steps.push_back({{finish_avg(slice)}});
  // C: AllGather inside the host.
  if (S > 1) {
    sub.count = count;
    sub.nranks = S;
    sub.in_place = true;
    append_mapped(s, ring_allreduce(sub, i, RingPhases::allgather_only), actives, Buf::recv, 0);
  }
  Step give_back;
  for (int extra : extras) give_back.actions.push_back(send_to(extra, all_out));
  add_step(s, std::move(give_back));
  return s;
}

RankSchedule leaders_allreduce(const CollectiveDesc& d, int r) {
  RankSchedule s;
  s.algorithm = "leaders";
  const size_t count = d.count;
  if (count == 0) return s;
  const Range all_in{Buf::send, 0, count}, all_out{Buf::recv, 0, count};
  const Hosts grouped = hosts_of(d, r, "leaders");
  const std::vector<std::vector<int>>& hosts = grouped.members;
  const int nhosts = static_cast<int>(hosts.size());
  const int host = grouped.of_rank;
  const std::vector<int>& local = hosts[static_cast<size_t>(host)];
  const int leader = local.front();
  if (r != leader) {
    s.steps.push_back({{send_to(leader, all_in)}});
    s.steps.push_back({{recv_copy_from(leader, all_out)}});
    return s;
  }
  // The host's vectors into recv, in rank order (the leader's own first).
  bool in_recv = d.in_place;
  for (size_t j = 1; j < local.size(); ++j) {
    s.steps.push_back({{recv_reduce_from(local[j], in_recv ? all_out : all_in, all_out)}});
    in_recv = true;
  }
  if (!in_recv) s.steps.push_back({{local_copy(all_in, all_out)}});
  if (nhosts > 1) {
    std::vector<int> leaders;
    for (const auto& h : hosts) leaders.push_back(h.front());
    CollectiveDesc sub;
    sub.op = OpType::allreduce;
    sub.redop = RedOp::sum;  // the average's division is done once, below
    sub.count = count;
    sub.nranks = nhosts;
    sub.in_place = true;
    const RankSchedule across = recursive_doubling_allreduce(sub, host);
    s.scratch_count = std::max(s.scratch_count, across.scratch_count);
    append_mapped(s, across, leaders, Buf::recv, 0);
  }
  Step give_back;
  if (d.redop == RedOp::avg && d.nranks > 1) give_back.actions.push_back(finish_avg(all_out));  // before the sends
  for (size_t j = 1; j < local.size(); ++j) give_back.actions.push_back(send_to(local[j], all_out));
  add_step(s, std::move(give_back));
  return s;
}

}  // namespace hoop::schedule
