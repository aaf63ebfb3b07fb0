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
// The schedules through one rank per host are in leaders.cc.
#include <algorithm>

#include <fmt/format.h>

#include "core/errors.h"
#include "schedule/fold.h"
#include "schedule/host_groups.h"

namespace hoop::schedule {

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

}  // namespace hoop::schedule
