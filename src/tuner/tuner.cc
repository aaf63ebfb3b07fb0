#include "tuner/tuner.h"

#include <fmt/format.h>

#include <bit>

#include "core/op_traits.h"
#include "hoop/error.h"
#include "tuner/symmetric_forms.h"

namespace hoop::tuner {

size_t count_bucket_representative(size_t count) { return count == 0 ? 0 : std::bit_floor(count); }

Tuner::Tuner(CostModel model, schedule::Topology topology, LinkView::Force force)
    : model_(std::move(model)), topology_(std::move(topology)), force_(force) {}

namespace {

bool any_tcp(const LinkView& links, int nranks) {
  if (links.force == LinkView::Force::tcp) return nranks > 1;
  if (links.force == LinkView::Force::shm) return false;
  for (int r = 1; r < nranks; ++r) {
    if (links.between(0, r) == LinkClass::tcp) return true;
  }
  return false;
}

// Whether the algorithm spreads over channels at all (else more channels change nothing). One
// over the shared region never does (and its schedule, which can be huge for many ranks and a
// large buffer, need not be built to find that out).
bool uses_channels(const std::string& name, schedule::CollectiveDesc desc, int k, Pricing how) {
  if (schedule::uses_region(name, desc.op)) return false;
  desc.nchannels = k;
  if (how == Pricing::symmetric) {
    if (auto known = symmetric_uses_channels(name, desc)) return *known;
  }
  try {
    const auto s = schedule::build(name, desc, 0);
    for (const auto& step : s.steps)
      for (const auto& a : step.actions)
        if (a.channel > 0) return true;
  } catch (const Error&) {
  }
  return false;
}

}  // namespace

std::vector<Candidate> Tuner::price_all(const schedule::CollectiveDesc& desc, size_t elem_bytes,
                                        const std::vector<std::string>& names,
                                        std::optional<int> forced_channels) const {
  const LinkView view = links();
  std::vector<int> channel_counts{1};
  if (forced_channels) {
    channel_counts = {*forced_channels};
  } else if (any_tcp(view, desc.nranks)) {
    channel_counts = {1, 2, 4};
  }
  std::vector<Candidate> out;
  for (const auto& name : names) {
    for (int k : channel_counts) {
      schedule::CollectiveDesc d = desc;
      d.topology = &topology_;
      d.nchannels = k;
      if (k > 1 && !forced_channels && !uses_channels(name, d, k, pricing_)) continue;
      out.push_back(Candidate{name, k, price(pricing_, name, d, elem_bytes, view, model_)});
    }
  }
  return out;
}

Choice Tuner::best(const std::vector<Candidate>& priced) {
  Choice c;
  bool have = false;
  for (const auto& p : priced) {
    if (!p.prediction.applicable) continue;
    if (!have || p.prediction.seconds < c.predicted_seconds) {
      c = {p.algorithm, p.nchannels, p.prediction.seconds};
      have = true;
    }
  }
  // Near-ties between an exchange algorithm and the ring go to the ring. An exchange step
  // (halving-doubling, recursive doubling) waits for one partner whose own lateness compounds
  // step after step; the ring streams each step through the links' buffers, so a rank that
  // runs late delays only its successor. The lockstep model sees none of it; measured in the
  // lab, the ring is 5-25% ahead of halving-doubling from 1 MiB where the model has the two
  // within 1% (docs/BENCHMARKS.md). (Naive took such ties too until its root's receives were
  // priced as travelling together, predict.cc.)
  if (!have || (c.algorithm != "halving-doubling" && c.algorithm != "recursive-doubling")) return c;
  const Candidate* steady = nullptr;
  for (const auto& p : priced) {
    if (p.prediction.applicable && p.algorithm == "ring" &&
        (!steady || p.prediction.seconds < steady->prediction.seconds)) {
      steady = &p;
    }
  }
  if (steady && steady->prediction.seconds <= c.predicted_seconds * (1 + kExchangeTieMargin)) {
    c = {steady->algorithm, steady->nchannels, steady->prediction.seconds};
  }
  return c;
}

Choice Tuner::choose(const schedule::CollectiveDesc& desc, size_t elem_bytes, const std::vector<std::string>& names,
                     std::optional<int> forced_channels) {
  const size_t rep = count_bucket_representative(desc.count);
  const bool rooted = has_root(desc.op);
  const auto key = std::make_tuple(static_cast<int>(desc.op), elem_bytes, rep, desc.nranks,
                                   !rooted || desc.root == 0, desc.registered, forced_channels.value_or(0),
                                   fmt::format("{}", fmt::join(names, ",")));
  std::lock_guard lk(mu_);
  if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  schedule::CollectiveDesc d = desc;
  d.count = rep;
  Choice c = best(price_all(d, elem_bytes, names, forced_channels));
  cache_.emplace(key, c);
  return c;
}

}  // namespace hoop::tuner
