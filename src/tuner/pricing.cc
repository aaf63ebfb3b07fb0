#include "tuner/pricing.h"

#include <algorithm>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#include "transport/shm/shm_transport.h"
#include "tuner/long_pipeline.h"
#include "tuner/symmetric_forms.h"

namespace hoop::tuner {

namespace {

// The most ranks on one host. Where it is 1, routing through each host's leader is every rank
// exchanging with every rank at once; beyond, a host's ranks share memory (unless TCP is forced).
int most_ranks_on_a_host(const LinkView& links, int nranks) {
  std::unordered_map<int, int> per_host;
  int most = 0;
  for (int r = 0; r < nranks; ++r) most = std::max(most, ++per_host[links.host_of(r)]);
  return most;
}

}  // namespace

Prediction price(Pricing how, const std::string& name, const schedule::CollectiveDesc& desc, size_t elem_bytes,
                 const LinkView& links, const CostModel& model) {
  // Where it cannot run (shm-direct across hosts), the registry says why.
  if (schedule::uses_region(name, desc.op)) {
    if (auto why = schedule::why_not_here(name, desc.op, links.reach(desc.nranks)); !why.empty()) {
      Prediction p;
      p.why_not = std::move(why);
      return p;
    }
  }
  if (schedule::chosen_across_hosts_only(name, desc.op) &&
      (links.reach(desc.nranks).one_host || most_ranks_on_a_host(links, desc.nranks) < 2)) {
    Prediction p;
    p.why_not = name + " is for ranks on two hosts or more, several on one";
    return p;
  }
  if (schedule::connects_every_pair(name, desc.op) && links.force != LinkView::Force::tcp) {
    const int most = most_ranks_on_a_host(links, desc.nranks);
    // At the ring a link gets before it shrinks for every pair to fit (CostModel::shm_ring_full_bytes):
    // rings shrunk so that every pair fits still hold up to 4 GiB, which another algorithm does not need.
    if (!transport::every_pair_fits(most, model.shm_ring_full_bytes)) {
      Prediction p;
      p.why_not = fmt::format("{} links every pair: {} ranks of a host would hold {} rings of {} KiB", name, most,
                              static_cast<uint64_t>(most) * static_cast<uint64_t>(most - 1),
                              model.shm_ring_full_bytes >> 10);
      return p;
    }
  }
  // Beyond 64 ranks the sample misses the slowest rank of the exchange and tree algorithms by
  // up to a few percent (tests/test_sim_fast.cc found 1.5-2% for binomial scatter at N = 128 with
  // 8 ranks per host; the tree is 10% optimistic at 1,024 ranks on 128 hosts), so without a
  // symmetric form every rank is walked while that is cheap, and always for the tree, whose
  // walk builds every rank's schedule anyway (its pipeline's fill depends on the whole tree).
  constexpr int kFullWalkUpTo = 256;
  if (how == Pricing::symmetric) {
    if (auto p = symmetric_form(name, desc, elem_bytes, links, model)) return *p;
    const bool every_rank = desc.nranks <= kFullWalkUpTo || name == "tree";
    if (auto p = long_pipeline(name, desc, elem_bytes, links, model, every_rank ? Walk::every_rank : Walk::sampled)) {
      return *p;
    }
    if (every_rank) how = Pricing::full_walk;
  }
  return predict(name, desc, elem_bytes, links, model,
                 how == Pricing::full_walk ? Walk::every_rank : Walk::sampled);
}

}  // namespace hoop::tuner
