// Halving-doubling (Rabenseifner). AllReduce = recursive-halving ReduceScatter + recursive-
// doubling AllGather over p = 2^floor(log2 N) ranks; ReduceScatter and AllGather are each half.
//
// Recursive halving: at level k (distance p/2^(k+1), halving) a rank exchanges half of the
// range it is responsible for with rank XOR distance: it sends the half its partner keeps and
// reduces the half it keeps. After log2 p levels virtual rank v holds the reduction of block v.
// Recursive doubling reverses it: at distance 1, 2, 4, ... partners swap everything they hold.
// Every element is reduced by exactly one rank, so all ranks end with the same bits.
//
// N not a power of two (Fold, fold.h): the first 2(N-p) ranks pair up; the even rank of each
// pair sends its vector to the odd one before (which reduces it) and receives the result after.
//
// Cost for n elements (alpha latency, beta time per element, gamma reduction per element):
//   AllReduce, N = p:  2 log2 N steps, sends 2 n (N-1)/N per rank:
//                      2 log2(N) alpha + 2 n (N-1)/N beta + n (N-1)/N gamma
//   AllReduce, N != p: 2 more steps; the pair ranks send n more each (fold, return):
//                      (2 log2 p + 2) alpha + (2 n (p-1)/p + 2n) beta + (n (p-1)/p + n) gamma
//   ReduceScatter (n = N*recvcount): log2 N steps, n (N-1)/N sent: log2(N) alpha + n(N-1)/N (beta+gamma)
//   AllGather (n = N*sendcount):     log2 N steps, n (N-1)/N sent: log2(N) alpha + n(N-1)/N beta
//   (N != p: + 2 steps, ReduceScatter's pairs send n more, AllGather's send n more.)
#include "schedule/fold.h"

namespace hoop::schedule {

namespace {

struct Span {  // virtual blocks [lo, hi)
  int lo = 0, hi = 0;
};

// The halves of `cur` at distance `mask`, as (kept, given) for virtual rank v.
std::pair<Span, Span> split(Span cur, int mask, int v) {
  const Span lower{cur.lo, cur.lo + mask}, upper{cur.lo + mask, cur.hi};
  return (v & mask) ? std::pair{upper, lower} : std::pair{lower, upper};
}

}  // namespace

RankSchedule halving_doubling_allreduce(const CollectiveDesc& d, int r) {
  RankSchedule s;
  s.algorithm = "halving-doubling";
  const size_t count = d.count;
  const Range all_in{Buf::send, 0, count}, all_out{Buf::recv, 0, count};
  const Fold f(d.nranks);
  if (fold_trivial_allreduce(d, r, f, s)) return s;
  const Chunking blocks{count, f.p2};
  auto range = [&](Buf b, Span sp) {
    return Range{b, blocks.offset(sp.lo), blocks.offset(sp.hi) - blocks.offset(sp.lo)};
  };
  Buf input = Buf::send;
  if (f.absorbs(r)) {
    s.steps.push_back({{recv_reduce_from(r - 1, all_in, all_out)}});
    input = Buf::recv;
  }
  const int v = f.virtual_rank(r);
  Span cur{0, f.p2};
  for (int mask = f.p2 / 2; mask >= 1; mask /= 2) {
    const int peer = f.real_rank(v ^ mask);
    const auto [kept, given] = split(cur, mask, v);
    Step step;
    add_transfer(step, send_to(peer, range(input, given)));
    add_transfer(step, recv_reduce_from(peer, range(input, kept), range(Buf::recv, kept)));
    add_step(s, std::move(step));
    input = Buf::recv;
    cur = kept;
  }
  for (int mask = 1; mask < f.p2; mask *= 2) {
    const int peer = f.real_rank(v ^ mask);
    const Span theirs{cur.lo ^ mask, (cur.lo ^ mask) + (cur.hi - cur.lo)};
    Step step;
    if (mask == 1 && d.redop == RedOp::avg && range(Buf::recv, cur).count > 0) {
      step.actions.push_back(finish_avg(range(Buf::recv, cur)));
    }
    add_transfer(step, send_to(peer, range(Buf::recv, cur)));
    add_transfer(step, recv_copy_from(peer, range(Buf::recv, theirs)));
    add_step(s, std::move(step));
    cur = Span{std::min(cur.lo, theirs.lo), std::max(cur.hi, theirs.hi)};
  }
  if (f.absorbs(r)) s.steps.push_back({{send_to(r - 1, all_out)}});
  return s;
}

RankSchedule halving_doubling_reducescatter(const CollectiveDesc& d, int r) {
  RankSchedule s;
  s.algorithm = "halving-doubling";
  const size_t c = d.count;  // elements per rank
  const size_t total = c * static_cast<size_t>(d.nranks);
  const Range out{Buf::recv, 0, c};
  if (d.nranks == 1) {
    if (!d.in_place && c > 0) s.steps.push_back({{local_copy(Range{Buf::send, 0, c}, out)}});
    return s;
  }
  if (c == 0) return s;
  const Fold f(d.nranks);
  if (f.folded_away(r)) {
    s.steps.push_back({{send_to(r + 1, Range{Buf::send, 0, total})}});
    s.steps.push_back({{recv_copy_from(r + 1, out)}});
    if (d.redop == RedOp::avg) s.steps.push_back({{finish_avg(out)}});
    return s;
  }
  // Virtual block v is the real blocks of the ranks it stands for: contiguous.
  auto elem = [&](int v) { return static_cast<size_t>(f.first_real(v)) * c; };
  const int v = f.virtual_rank(r);
  const bool absorbs = f.absorbs(r);
  // Partial sums live in scratch: the whole vector's layout for an absorbing rank (it reduces
  // its partner's vector first), else the layout of the half kept at the first level.
  const Span first_kept = split(Span{0, f.p2}, f.p2 / 2, v).first;
  const size_t base = absorbs ? 0 : elem(first_kept.lo);
  s.scratch_count = absorbs ? total : elem(first_kept.hi) - base;
  auto partial = [&](Span sp) { return Range{Buf::scratch, elem(sp.lo) - base, elem(sp.hi) - elem(sp.lo)}; };
  auto input = [&](Span sp) { return Range{Buf::send, elem(sp.lo), elem(sp.hi) - elem(sp.lo)}; };
  bool first = !absorbs;  // does the next level read the user's send buffer?
  if (absorbs) {
    s.steps.push_back({{recv_reduce_from(r - 1, Range{Buf::send, 0, total}, Range{Buf::scratch, 0, total})}});
  }
  Span cur{0, f.p2};
  for (int mask = f.p2 / 2; mask >= 1; mask /= 2) {
    const int peer = f.real_rank(v ^ mask);
    const auto [kept, given] = split(cur, mask, v);
    const bool last = mask == 1;
    Step step;
    add_transfer(step, send_to(peer, first ? input(given) : partial(given)));
    add_transfer(step, recv_reduce_from(peer, first ? input(kept) : partial(kept),
                                        last && !absorbs ? out : partial(kept)));
    add_step(s, std::move(step));
    first = false;
    cur = kept;
  }
  if (absorbs) {
    // This rank now holds the reduced blocks of r-1 and r.
    Step step;
    step.actions.push_back(send_to(r - 1, Range{Buf::scratch, elem(v), c}));
    step.actions.push_back(local_copy(Range{Buf::scratch, elem(v) + c, c}, out));
    s.steps.push_back(std::move(step));
  }
  if (f.p2 == 2 && !absorbs) s.scratch_count = 0;  // one level, straight into recv: no partials
  if (d.redop == RedOp::avg) s.steps.push_back({{finish_avg(out)}});
  return s;
}

RankSchedule halving_doubling_allgather(const CollectiveDesc& d, int r) {
  RankSchedule s;
  s.algorithm = "halving-doubling";
  const size_t c = d.count;  // elements per rank
  const size_t total = c * static_cast<size_t>(d.nranks);
  const Range mine{Buf::send, 0, c};
  auto block = [&](int i) { return Range{Buf::recv, static_cast<size_t>(i) * c, c}; };
  if (d.nranks == 1) {
    if (!d.in_place && c > 0) s.steps.push_back({{local_copy(mine, block(0))}});
    return s;
  }
  if (c == 0) return s;
  const Fold f(d.nranks);
  Step first;
  if (!d.in_place) first.actions.push_back(local_copy(mine, block(r)));
  if (f.folded_away(r)) {
    first.actions.push_back(send_to(r + 1, mine));
    s.steps.push_back(std::move(first));
    Step back;
    add_transfer(back, recv_copy_from(r + 1, Range{Buf::recv, 0, static_cast<size_t>(r) * c}));
    add_transfer(back, recv_copy_from(r + 1, Range{Buf::recv, static_cast<size_t>(r + 1) * c,
                                                   total - static_cast<size_t>(r + 1) * c}));
    add_step(s, std::move(back));
    return s;
  }
  if (f.absorbs(r)) {
    first.actions.push_back(recv_copy_from(r - 1, block(r - 1)));
    s.steps.push_back(std::move(first));
    first = Step{};
  }
  auto range = [&](Span sp) {
    const size_t lo = static_cast<size_t>(f.first_real(sp.lo)) * c;
    return Range{Buf::recv, lo, static_cast<size_t>(f.first_real(sp.hi)) * c - lo};
  };
  const int v = f.virtual_rank(r);
  Span cur{v, v + 1};
  for (int mask = 1; mask < f.p2; mask *= 2) {
    const int peer = f.real_rank(v ^ mask);
    const Span theirs{cur.lo ^ mask, (cur.lo ^ mask) + (cur.hi - cur.lo)};
    Step step = std::move(first);
    first = Step{};
    // The first send reads the user's block, not the copy of it made in the same step.
    const bool own_block_only = mask == 1 && !f.absorbs(r);
    add_transfer(step, send_to(peer, own_block_only ? mine : range(cur)));
    add_transfer(step, recv_copy_from(peer, range(theirs)));
    add_step(s, std::move(step));
    cur = Span{std::min(cur.lo, theirs.lo), std::max(cur.hi, theirs.hi)};
  }
  if (f.absorbs(r)) {
    Step back;
    add_transfer(back, send_to(r - 1, Range{Buf::recv, 0, static_cast<size_t>(r - 1) * c}));
    add_transfer(back, send_to(r - 1, Range{Buf::recv, static_cast<size_t>(r) * c,
                                            total - static_cast<size_t>(r) * c}));
    add_step(s, std::move(back));
  }
  return s;
}

}  // namespace hoop::schedule
