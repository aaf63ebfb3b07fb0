// The algorithms known for each collective, by name.
#include <fmt/format.h>

#include <functional>

#include "core/errors.h"
#include "core/op_traits.h"
#include "schedule/schedule_builders.h"

namespace hoop::schedule {

namespace {

using Builder = std::function<RankSchedule(const CollectiveDesc&, int)>;

RankSchedule ring_allreduce_all(const CollectiveDesc& d, int r) { return ring_allreduce(d, r); }

struct Entry {
  OpType op;
  const char* name;
  Builder build;
  // Runs over one shared region instead of links: every rank on one host, shared memory allowed.
  bool one_region = false;
  // Routes through one rank per host: the tuner considers it only for ranks on two hosts or
  // more, several on one. On one host it is a gather to rank 0 and back, with one rank per
  // host an exchange of everyone with everyone at once (forced, it runs there all the same).
  bool across_hosts = false;
  // Connects every pair of ranks (a link each): on a host of many ranks the links' rings take
  // memory by the square of its ranks, and the tuner passes it by there (connects_every_pair).
  // AllToAllv's pairwise is not marked: AllToAllv has no other algorithm.
  bool every_pair = false;
};

const std::vector<Entry>& registry() {
  static const std::vector<Entry> entries = {
      // Ring-based algorithms spread over desc.nchannels channels (with_channels; one part
      // when nchannels is 1 or the count is small).
      {OpType::allreduce, "ring", [](const CollectiveDesc& d, int r) { return with_channels(ring_allreduce_all, d, r, d.nchannels); }},
      {OpType::reducescatter, "ring", [](const CollectiveDesc& d, int r) { return with_channels(ring_reducescatter, d, r, d.nchannels); }},
      {OpType::allgather, "ring", [](const CollectiveDesc& d, int r) { return with_channels(ring_allgather, d, r, d.nchannels); }},
      // Broadcast and Reduce along the ring order: a pipelined chain. "chain" is an alias.
      {OpType::broadcast, "ring", [](const CollectiveDesc& d, int r) { return with_channels(chain_broadcast, d, r, d.nchannels); }},
      {OpType::broadcast, "chain", [](const CollectiveDesc& d, int r) { return with_channels(chain_broadcast, d, r, d.nchannels); }},
      {OpType::reduce, "ring", [](const CollectiveDesc& d, int r) { return with_channels(chain_reduce, d, r, d.nchannels); }},
      {OpType::reduce, "chain", [](const CollectiveDesc& d, int r) { return with_channels(chain_reduce, d, r, d.nchannels); }},
      // ---- halving-doubling, recursive-doubling, hierarchical (begin) ----
      {OpType::allreduce, "halving-doubling", halving_doubling_allreduce},
      {OpType::reducescatter, "halving-doubling", halving_doubling_reducescatter},
      {OpType::allgather, "halving-doubling", halving_doubling_allgather},
      {OpType::allreduce, "recursive-doubling", recursive_doubling_allreduce},
      {OpType::allgather, "recursive-doubling", [](const CollectiveDesc& d, int r) {
         RankSchedule s = halving_doubling_allgather(d, r);
         s.algorithm = "recursive-doubling";
         return s;
       }},
      {OpType::allreduce, "hierarchical", hierarchical_allreduce},
      {OpType::allreduce, "leaders", leaders_allreduce},
      {OpType::reducescatter, "leaders", leaders_reducescatter, false, true},
      {OpType::allgather, "leaders", leaders_allgather, false, true},
      // ---- halving-doubling, recursive-doubling, hierarchical (end) ----
      {OpType::barrier, "dissemination", dissemination_barrier},
      {OpType::send, "p2p", point_to_point},
      {OpType::recv, "p2p", point_to_point},
      // ---- tree and naive (begin) ----
      {OpType::allreduce, "tree", tree_allreduce},
      {OpType::reduce, "tree", tree_reduce},
      {OpType::broadcast, "tree", tree_broadcast},
      {OpType::allreduce, "naive", naive_allreduce},
      {OpType::reduce, "naive", naive_reduce},
      {OpType::broadcast, "naive", naive_broadcast},
      {OpType::reducescatter, "naive", naive_reducescatter},
      // ---- tree and naive (end) ----
      // ---- the rest of the collective set (begin) ----
      {OpType::alltoall, "pairwise", pairwise_alltoall, false, false, true},
      {OpType::alltoall, "bruck", bruck_alltoall},
      // After pairwise: where both are bound by the hosts' links their prices are equal and
      // the first wins; pairwise overlaps the hand-overs inside a host that leaders adds before
      // and after its exchange (4 MiB on 2 hosts x 4 ranks: 74 ms against 83).
      {OpType::alltoall, "leaders", leaders_alltoall, false, true},
      {OpType::alltoallv, "pairwise", pairwise_alltoall},
      {OpType::gather, "linear", linear_gather},
      {OpType::gather, "binomial", binomial_gather},
      {OpType::gatherv, "linear", linear_gather},
      {OpType::scatter, "linear", linear_scatter},
      {OpType::scatter, "binomial", binomial_scatter},
      {OpType::scatterv, "linear", linear_scatter},
      {OpType::allgatherv, "ring", ring_allgatherv},
      {OpType::allgatherv, "pairwise", pairwise_allgatherv, false, false, true},
      {OpType::reducescatterv, "ring", ring_reducescatterv},
      {OpType::reducescatterv, "pairwise", pairwise_reducescatterv, false, false, true},
      // ---- the rest of the collective set (end) ----
      // ---- shm-direct (begin) ----
      {OpType::allreduce, kDirectAlgorithm, direct_schedule, true},
      {OpType::reducescatter, kDirectAlgorithm, direct_schedule, true},
      {OpType::allgather, kDirectAlgorithm, direct_schedule, true},
      {OpType::broadcast, kDirectAlgorithm, direct_schedule, true},
      {OpType::reduce, kDirectAlgorithm, direct_schedule, true},
      {OpType::barrier, kDirectAlgorithm, direct_schedule, true},
      {OpType::alltoall, kDirectAlgorithm, direct_schedule, true},
      // ---- shm-direct (end) ----
  };
  return entries;
}

// The v-forms' builders read the per-rank blocks: a desc without them cannot be built.
void require_blocks(const CollectiveDesc& d) {
  if (!is_vector_op(d.op) || d.blocks) return;
  throw_error(ErrorCode::invalid_argument, fmt::format("{} needs per-rank counts (CollectiveDesc::blocks)", to_string(d.op)));
}

const Entry* find(const std::string& algorithm, OpType op) {
  for (const auto& e : registry()) {
    if (e.op == op && algorithm == e.name) return &e;
  }
  return nullptr;
}

}  // namespace

std::vector<std::string> algorithms_for(OpType op) {
  std::vector<std::string> names;
  for (const auto& e : registry()) {
    if (e.op == op) names.emplace_back(e.name);
  }
  return names;
}

bool runs_here(const std::string& algorithm, OpType op, const Reach& reach) {
  const Entry* e = find(algorithm, op);
  return e && (!e->one_region || (reach.one_host && reach.shared_memory));
}

bool chosen_across_hosts_only(const std::string& algorithm, OpType op) {
  const Entry* e = find(algorithm, op);
  return e && e->across_hosts;
}

bool connects_every_pair(const std::string& algorithm, OpType op) {
  const Entry* e = find(algorithm, op);
  return e && e->every_pair;
}

bool uses_region(const std::string& algorithm, OpType op) {
  const Entry* e = find(algorithm, op);
  return e && e->one_region;
}

std::string why_not_here(const std::string& algorithm, OpType op, const Reach& reach) {
  const Entry* e = find(algorithm, op);
  if (!e) return fmt::format("'{}' does not implement {}", algorithm, to_string(op));
  if (e->one_region && !reach.one_host) return fmt::format("{} needs every rank on one host", algorithm);
  if (e->one_region && !reach.shared_memory) return fmt::format("{} needs shared memory (HOOP_TRANSPORT=tcp)", algorithm);
  return {};
}

std::vector<std::string> algorithms_for(OpType op, const Reach& reach) {
  std::vector<std::string> names;
  for (const auto& name : algorithms_for(op)) {
    if (runs_here(name, op, reach)) names.push_back(name);
  }
  return names;
}

RankSchedule build_default(const CollectiveDesc& desc, int rank) {
  require_blocks(desc);
  for (const auto& e : registry()) {
    if (e.op == desc.op) return e.build(desc, rank);
  }
  throw_error(ErrorCode::internal, fmt::format("no algorithm for {}", to_string(desc.op)));
}

RankSchedule build(const std::string& algorithm, const CollectiveDesc& desc, int rank) {
  if (algorithm.empty() || algorithm == "auto") return build_default(desc, rank);
  require_blocks(desc);
  for (const auto& e : registry()) {
    if (e.op == desc.op && algorithm == e.name) return e.build(desc, rank);
  }
  throw_error(ErrorCode::invalid_argument,
              fmt::format("unknown algorithm '{}' for {} (available: {})", algorithm,
                          to_string(desc.op), fmt::join(algorithms_for(desc.op), ", ")));
}

const char* buf_name(Buf b) {
  switch (b) {
    case Buf::send: return "send";
    case Buf::recv: return "recv";
    case Buf::scratch: return "scratch";
    case Buf::region: return "region";
  }
  return "?";
}

std::string range_text(const Range& r) {
  return fmt::format("{}[{}..{})", buf_name(r.buf), r.offset, r.offset + r.count);
}

namespace {

void append_steps(std::string& out, const std::vector<Step>& steps, size_t first_step) {
  for (size_t i = 0; i < steps.size(); ++i) {
    const size_t k = first_step + i;
    for (const Action& a : steps[i].actions) {
      out += fmt::format("  step {}: ", k);
      switch (a.kind) {
        case ActionKind::send:
          out += fmt::format("send {} -> rank {}", range_text(a.src), a.peer);
          if (a.after >= 0) out += fmt::format(" (after action {})", a.after);
          if (a.channel != 0) out += fmt::format(" (channel {})", a.channel);
          break;
        case ActionKind::recv_copy:
          out += fmt::format("recv {} <- rank {}", range_text(a.dst), a.peer);
          break;
        case ActionKind::recv_reduce:
          out += a.received_first
                     ? fmt::format("recv-reduce {} = data from rank {} op {}", range_text(a.dst), a.peer,
                                   range_text(a.src))
                     : fmt::format("recv-reduce {} = {} op data from rank {}", range_text(a.dst),
                                   range_text(a.src), a.peer);
          break;
        case ActionKind::copy:
          out += fmt::format("copy {} -> {}", range_text(a.src), range_text(a.dst));
          break;
        case ActionKind::finish_avg:
          out += fmt::format("divide {} by nranks", range_text(a.dst));
          break;
        case ActionKind::publish: out += "publish (raise the flag)"; break;
        case ActionKind::wait_flag: out += fmt::format("wait for rank {}'s flag {}", a.peer, a.flag); break;
        case ActionKind::read:
          out += fmt::format("read {} <- rank {} {} at flag {}", range_text(a.dst), a.peer, range_text(a.remote), a.flag);
          break;
        case ActionKind::read_reduce:
          out += fmt::format("read-reduce {} = {} op rank {} {} at flag {}", range_text(a.dst), range_text(a.src),
                             a.peer, range_text(a.remote), a.flag);
          break;
        case ActionKind::write:
          out += fmt::format("write rank {} {} <- {} at flag {}", a.peer, range_text(a.remote), range_text(a.src),
                             a.flag);
          break;
      }
      out += "\n";
    }
  }
}

}  // namespace

std::string to_string(const RankSchedule& s) {
  std::string out = fmt::format("algorithm {} ({} steps, scratch {})\n", s.algorithm,
                                s.steps.size(), s.scratch_count);
  append_steps(out, s.steps, 0);
  for (size_t v = 0; v < s.variants.size(); ++v) {
    const char* when = s.branch == BranchRule::any_in_place
                           ? (v == 1 ? "some rank in place" : "no rank in place")
                           : (v == 1 ? "every rank registered" : "not every rank registered");
    out += fmt::format(" variant {} ({}):\n", v, when);
    append_steps(out, s.variants[v], s.steps.size());
  }
  return out;
}

size_t elements_sent(const RankSchedule& s) {
  size_t n = 0;
  for (const auto& step : s.steps)
    for (const auto& a : step.actions)
      if (a.kind == ActionKind::send) n += a.src.count;
  return n;
}

size_t elements_received(const RankSchedule& s) {
  size_t n = 0;
  for (const auto& step : s.steps)
    for (const auto& a : step.actions)
      if (a.kind == ActionKind::recv_copy || a.kind == ActionKind::recv_reduce) n += a.dst.count;
  return n;
}

}  // namespace hoop::schedule
