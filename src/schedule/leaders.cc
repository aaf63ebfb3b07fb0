// Collectives through one rank per host, its "leader" (the host's first rank).
//
// Through the hosts' leaders, for small vectors on hosts of several ranks. AllReduce: every
// rank of a host sends its vector to the host's first rank (its leader), which reduces them in
// rank order, one receive per step; the leaders AllReduce across hosts by recursive doubling
// (recursive_doubling.cc: canonical operand order, every leader ends with the same bits); each
// leader sends the result to its host's ranks. Three dependent hand-overs for a host's ranks
// where the hierarchical ring decomposition takes 2(L-1) + 2(H-1), and a host's link carries
// n log2 H each way (n per level) against 2 n (H-1)/H; its leader moves 2 n (L-1) over shared
// memory.
//   (L-1)(alpha_shm + n beta_shm + n gamma) + log2(H)(alpha_net + n beta_net + n gamma)
//   + alpha_shm + (L-1) n beta_shm.
//
// ReduceScatter: the same reduction of the whole vectors (N blocks) into the leader's scratch;
// with each other leader in turn (a step each) it exchanges the sums of the other's blocks
// for the sums of its own and adds them; then it sends every rank of its host that rank's
// block. AllGather: each rank sends its block to its leader, the leaders send their host's
// blocks to every other leader (one step), each leader sends the whole vector to its host's
// ranks. Inside a host both move whole vectors where halving-doubling and the ring move
// blocks; across hosts a host's link carries only the blocks of the other hosts' ranks
// (L(H-1), the least it can), where the ring's carries N-1.
//
// AllToAll: the ranks of a host trade their blocks for each other directly and hand the
// leader the blocks for other hosts; the leader sends each other host's leader one message
// with every block its host's ranks send there, receives one from it, and hands its ranks the
// blocks for them. Between two hosts one message each way, where pairwise and Bruck send
// L*L or more, each after the last: small blocks over a high-latency link. The leader
// rearranges the blocks with local copies (its scratch is 2 L (N-L) blocks, plus the input
// when in place).
#include <algorithm>

#include "schedule/fold.h"
#include "schedule/host_groups.h"
#include "schedule/schedule_builders.h"

namespace hoop::schedule {

namespace {

// The hosts, and this rank's host's ranks and leader.
struct Seat {
  Hosts grouped;
  std::vector<int> local;
  int leader = 0;
};
Seat seat_of(const CollectiveDesc& d, int r) {
  Seat seat{hosts_of(d, r, "leaders"), {}, 0};
  seat.local = seat.grouped.members[static_cast<size_t>(seat.grouped.of_rank)];
  seat.leader = seat.local.front();
  return seat;
}

// A rank that is not its host's leader: hands `up` to the leader, takes `down` back.
void through_leader(RankSchedule& s, int leader, Range up, Range down) {
  s.steps.push_back({{send_to(leader, up)}});
  s.steps.push_back({{recv_copy_from(leader, down)}});
}

std::vector<int> leaders_of(const Hosts& grouped) {
  std::vector<int> leaders;
  for (const auto& h : grouped.members) leaders.push_back(h.front());
  return leaders;
}

// The host's vectors reduced by its leader into `into`, in rank order (the leader's own, in
// `own`, first; `own` may be `into` itself), one receive per step.
void reduce_at_leader(RankSchedule& s, const std::vector<int>& local, Range own, Range into) {
  bool in_into = own.buf == into.buf && own.offset == into.offset;
  for (size_t j = 1; j < local.size(); ++j) {
    s.steps.push_back({{recv_reduce_from(local[j], in_into ? into : own, into)}});
    in_into = true;
  }
  if (!in_into) s.steps.push_back({{local_copy(own, into)}});
}

}  // namespace

RankSchedule leaders_allreduce(const CollectiveDesc& d, int r) {
  RankSchedule s;
  s.algorithm = "leaders";
  const size_t count = d.count;
  if (count == 0) return s;
  const Range all_in{Buf::send, 0, count}, all_out{Buf::recv, 0, count};
  const auto [grouped, local, leader] = seat_of(d, r);
  if (r != leader) {
    through_leader(s, leader, all_in, all_out);
    return s;
  }
  reduce_at_leader(s, local, d.in_place ? all_out : all_in, all_out);
  if (grouped.members.size() > 1) {
    CollectiveDesc sub;
    sub.op = OpType::allreduce;
    sub.redop = RedOp::sum;  // the average's division is done once, below
    sub.count = count;
    sub.nranks = static_cast<int>(grouped.members.size());
    sub.in_place = true;
    const RankSchedule across = recursive_doubling_allreduce(sub, grouped.of_rank);
    s.scratch_count = std::max(s.scratch_count, across.scratch_count);
    append_mapped(s, across, leaders_of(grouped), Buf::recv, 0);
  }
  Step give_back;
  if (d.redop == RedOp::avg && d.nranks > 1) give_back.actions.push_back(finish_avg(all_out));  // before the sends
  for (size_t j = 1; j < local.size(); ++j) give_back.actions.push_back(send_to(local[j], all_out));
  add_step(s, std::move(give_back));
  return s;
}

RankSchedule leaders_reducescatter(const CollectiveDesc& d, int r) {
  RankSchedule s;
  s.algorithm = "leaders";
  const size_t c = d.count;  // elements per rank
  if (c == 0) return s;
  const size_t total = c * static_cast<size_t>(d.nranks);
  const Range all_in{Buf::send, 0, total}, out{Buf::recv, 0, c};
  const auto [grouped, local, leader] = seat_of(d, r);
  if (r != leader) {
    through_leader(s, leader, all_in, out);
    return s;
  }
  // The host's sum in scratch: the whole input is read before recv (in place: a block of
  // send) is written.
  const Range partial{Buf::scratch, 0, total};
  s.scratch_count = total;
  reduce_at_leader(s, local, all_in, partial);
  auto block = [&](int q) { return Range{Buf::scratch, static_cast<size_t>(q) * c, c}; };
  // With every other leader in host order, one step each: this host's sum of that host's
  // blocks out, that host's sum of this host's blocks in, added.
  for (const auto& other : grouped.members) {
    if (other.front() == r) continue;
    Step exchange;
    for (int q : other) add_transfer(exchange, send_to(other.front(), block(q)));
    for (int q : local) add_transfer(exchange, recv_reduce_from(other.front(), block(q), block(q)));
    add_step(s, std::move(exchange));
  }
  Step give_back;
  if (d.redop == RedOp::avg && d.nranks > 1) {
    for (int q : local) give_back.actions.push_back(finish_avg(block(q)));  // before the sends
  }
  for (size_t j = 1; j < local.size(); ++j) give_back.actions.push_back(send_to(local[j], block(local[j])));
  give_back.actions.push_back(local_copy(block(r), out));
  add_step(s, std::move(give_back));
  return s;
}

RankSchedule leaders_allgather(const CollectiveDesc& d, int r) {
  RankSchedule s;
  s.algorithm = "leaders";
  const size_t c = d.count;  // elements per rank
  if (c == 0) return s;
  const size_t total = c * static_cast<size_t>(d.nranks);
  const Range mine{Buf::send, 0, c}, all_out{Buf::recv, 0, total};
  auto block = [&](int q) { return Range{Buf::recv, static_cast<size_t>(q) * c, c}; };
  const auto [grouped, local, leader] = seat_of(d, r);
  if (r != leader) {
    through_leader(s, leader, mine, all_out);  // its own block comes back with the others
    return s;
  }
  Step gather;
  if (!d.in_place) gather.actions.push_back(local_copy(mine, block(r)));
  for (size_t j = 1; j < local.size(); ++j) {
    gather.actions.push_back(recv_copy_from(local[j], block(local[j])));
  }
  add_step(s, std::move(gather));
  // The host's blocks to every other leader, theirs from each: one step, in member order.
  Step across;
  for (const auto& other : grouped.members) {
    if (other.front() == r) continue;
    for (int q : local) add_transfer(across, send_to(other.front(), block(q)));
    for (int q : other) add_transfer(across, recv_copy_from(other.front(), block(q)));
  }
  add_step(s, std::move(across));
  Step give_back;
  for (size_t j = 1; j < local.size(); ++j) give_back.actions.push_back(send_to(local[j], all_out));
  add_step(s, std::move(give_back));
  return s;
}

namespace {

// Runs of consecutive ranks in `ranks` (sorted): {index of the first, length}. Both ends of a
// transfer compute them from the same list, so merging a run into one message keeps them
// matched.
std::vector<std::pair<size_t, size_t>> runs_of(const std::vector<int>& ranks) {
  std::vector<std::pair<size_t, size_t>> runs;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (!runs.empty() && ranks[i] == ranks[i - 1] + 1) {
      ++runs.back().second;
    } else {
      runs.push_back({i, 1});
    }
  }
  return runs;
}

size_t index_in(const std::vector<int>& ranks, int q) {
  return static_cast<size_t>(std::lower_bound(ranks.begin(), ranks.end(), q) - ranks.begin());
}

}  // namespace

RankSchedule leaders_alltoall(const CollectiveDesc& d, int r) {
  RankSchedule s;
  s.algorithm = "leaders";
  const size_t c = d.count;  // elements per block
  if (c == 0) return s;
  const int n = d.nranks;
  const size_t total = c * static_cast<size_t>(n);
  const auto [grouped, local, leader] = seat_of(d, r);
  // The ranks of the other hosts, in rank order: the leader keeps their blocks in this order.
  std::vector<int> others;
  for (int q = 0; q < n; ++q) {
    if (!std::binary_search(local.begin(), local.end(), q)) others.push_back(q);
  }
  const size_t nl = local.size(), nf = others.size();
  // In place, recv overwrites blocks not sent yet: the input is read from a copy in scratch.
  const size_t staged = d.in_place && n > 1 ? total : 0;
  auto input = [&](int q, size_t blocks = 1) {
    return staged ? Range{Buf::scratch, static_cast<size_t>(q) * c, blocks * c}
                  : Range{Buf::send, static_cast<size_t>(q) * c, blocks * c};
  };
  auto output = [&](int q, size_t blocks = 1) { return Range{Buf::recv, static_cast<size_t>(q) * c, blocks * c}; };

  // Inside the host: every block for a rank of the host goes straight to it.
  Step inside;
  if (staged) inside.actions.push_back(local_copy(Range{Buf::send, 0, total}, Range{Buf::scratch, 0, total}));
  if (!d.in_place) inside.actions.push_back(local_copy(input(r), output(r)));
  for (int q : local) {
    if (q == r) continue;
    inside.actions.push_back(send_to(q, input(q)));
    inside.actions.push_back(recv_copy_from(q, output(q)));
  }
  const auto runs = runs_of(others);
  if (r != leader) {
    // The blocks for the other hosts to the leader; theirs for this rank back from it.
    for (const auto& [first, len] : runs) inside.actions.push_back(send_to(leader, input(others[first], len)));
    add_step(s, std::move(inside));
    Step back;
    for (const auto& [first, len] : runs) back.actions.push_back(recv_copy_from(leader, output(others[first], len)));
    add_step(s, std::move(back));
    s.scratch_count = staged;
    return s;
  }
  // The leader's scratch after the staged input, two areas of L (N-L) blocks. `held`: for each
  // rank of the host, its blocks for the other hosts in `others` order. `out`: per other host,
  // its ranks' blocks from this host ([their rank][this host's rank]). The blocks from the
  // other hosts arrive in `held` (read into `out` at the start of that step: a step's local
  // actions run before its transfers, in the engine's run_step as in the checker's enter),
  // per other host [this host's rank][their rank]; they are then sorted into `out`, for each
  // rank of the host in `others` order, and sent from there.
  const size_t held = staged, out = held + nl * nf * c, in = held;
  s.scratch_count = out + nl * nf * c;
  auto by_rank = [&](size_t area, size_t m, size_t f, size_t blocks = 1) {
    return Range{Buf::scratch, area + (m * nf + f) * c, blocks * c};
  };
  auto held_block = [&](size_t m, size_t f, size_t blocks = 1) { return by_rank(held, m, f, blocks); };
  for (size_t m = 1; m < nl; ++m) {
    for (const auto& [first, len] : runs) inside.actions.push_back(recv_copy_from(local[m], held_block(m, first, len)));
  }
  add_step(s, std::move(inside));
  if (nf == 0) return s;

  // Across hosts, one message each way per other host.
  Step across;
  size_t at = 0;  // blocks into `out` and `in` of the current other host
  std::vector<size_t> start_of_host;
  for (const auto& other : grouped.members) {
    if (other.front() == leader) continue;
    start_of_host.push_back(at);
    for (size_t j = 0; j < other.size(); ++j) {
      for (size_t m = 0; m < nl; ++m) {
        const Range to{Buf::scratch, out + (at + j * nl + m) * c, c};
        across.actions.push_back(local_copy(m == 0 ? input(other[j]) : held_block(m, index_in(others, other[j])), to));
      }
    }
    const size_t blocks = other.size() * nl;
    across.actions.push_back(send_to(other.front(), Range{Buf::scratch, out + at * c, blocks * c}));
    across.actions.push_back(recv_copy_from(other.front(), Range{Buf::scratch, in + at * c, blocks * c}));
    at += blocks;
  }
  add_step(s, std::move(across));

  // Back inside: each rank's blocks from the other hosts, in rank order; the leader's straight
  // into recv.
  Step back;
  size_t h = 0;
  for (const auto& other : grouped.members) {
    if (other.front() == leader) continue;
    for (size_t m = 0; m < nl; ++m) {
      for (size_t j = 0; j < other.size(); ++j) {
        const Range from{Buf::scratch, in + (start_of_host[h] + m * other.size() + j) * c, c};
        back.actions.push_back(local_copy(from, m == 0 ? output(other[j]) : by_rank(out, m, index_in(others, other[j]))));
      }
    }
    ++h;
  }
  for (size_t m = 1; m < nl; ++m) {
    for (const auto& [first, len] : runs) back.actions.push_back(send_to(local[m], by_rank(out, m, first, len)));
  }
  add_step(s, std::move(back));
  return s;
}

}  // namespace hoop::schedule
