#include "tuner/long_pipeline.h"

#include <fmt/format.h>

#include <algorithm>
#include <future>
#include <map>
#include <memory>
#include <mutex>

#include "schedule/schedule.h"

namespace hoop::tuner {

namespace {

// Chunks of the shorter pipelines: more than the pipeline is deep, so that both have steps
// where every offset of the tree is busy (the steady state) and the whole fill and drain. The
// depth is read off the schedule: a call of one chunk per half takes as many steps as chunk 0
// needs to cross the tree (both ways for AllReduce).
size_t short_chunks(const std::string& name, const schedule::CollectiveDesc& d) {
  schedule::CollectiveDesc one = d;
  one.count = 2;
  size_t depth = 0;
  for (int r : {0, d.root}) depth = std::max(depth, schedule::build(name, one, r).steps.size());
  return depth + 2;
}

size_t chunks_of(size_t elements) {
  return (elements + schedule::kTreeChunkElements - 1) / schedule::kTreeChunkElements;
}

// The walks of the short pipelines, by everything they depend on.
struct ShortPair {
  std::vector<int> hosts;
  Prediction a, b;
};

ShortPair walk_pair(const std::string& name, const schedule::CollectiveDesc& d, size_t chunk, size_t k1, size_t elem,
                    const LinkView& links, const CostModel& model, Walk walk, const std::vector<int>& hosts) {
  ShortPair p;
  p.hosts = hosts;
  schedule::CollectiveDesc da = d, db = d;
  da.count = 2 * k1 * chunk;
  db.count = 2 * (k1 + 1) * chunk;
  // The two walks at once: hoop-sim's other threads may all be waiting for this pair.
  auto b = std::async(std::launch::async, [&] { return predict(name, db, elem, links, model, walk); });
  p.a = predict(name, da, elem, links, model, walk);
  p.b = b.get();
  return p;
}

// Shared by the threads that price calls at once (hoop-sim prices its sizes in parallel): the
// first to ask walks the pair, the others wait for it.
std::shared_ptr<const ShortPair> short_pair(const std::string& name, const schedule::CollectiveDesc& d, size_t chunk,
                                            size_t k1, size_t elem, const LinkView& links, const CostModel& model,
                                            Walk walk) {
  using Pending = std::shared_future<std::shared_ptr<const ShortPair>>;
  static std::mutex mu;
  static std::map<std::string, Pending> cache;
  const std::vector<int> none;
  const std::vector<int>& hosts = links.topology ? links.topology->host_of_rank : none;
  uint64_t hosts_hash = 1469598103934665603ull;  // FNV-1a
  for (int h : hosts) hosts_hash = (hosts_hash ^ static_cast<uint32_t>(h)) * 1099511628211ull;
  const std::string key = fmt::format("{} {} {} {} {} {} {} {} {} {} {} {} {} {}", name, static_cast<int>(d.op),
                                      d.nranks, d.root, static_cast<int>(d.redop), d.in_place, d.nchannels, elem, chunk,
                                      k1, static_cast<int>(walk), static_cast<int>(links.force), hosts_hash,
                                      to_json(model));
  std::promise<std::shared_ptr<const ShortPair>> mine;
  Pending pending;
  bool walk_here = false;
  {
    std::lock_guard lk(mu);
    auto it = cache.find(key);
    if (it != cache.end()) {
      pending = it->second;
    } else {
      if (cache.size() > 64) cache.clear();
      pending = cache[key] = mine.get_future().share();
      walk_here = true;
    }
  }
  if (walk_here) {
    try {
      mine.set_value(std::make_shared<const ShortPair>(walk_pair(name, d, chunk, k1, elem, links, model, walk, hosts)));
    } catch (...) {
      mine.set_exception(std::current_exception());
    }
  }
  auto pair = pending.get();
  // Two topologies whose hashes collide: walk this one here.
  if (pair->hosts != hosts) pair = std::make_shared<const ShortPair>(walk_pair(name, d, chunk, k1, elem, links, model, walk, hosts));
  return pair;
}

}  // namespace

std::optional<Prediction> long_pipeline(const std::string& name, const schedule::CollectiveDesc& d, size_t elem,
                                        const LinkView& links, const CostModel& model, Walk walk) {
  if (name != "tree" || (d.op != OpType::allreduce && d.op != OpType::reduce) || d.nranks < 2) return std::nullopt;
  const size_t half = schedule::Chunking{d.count, 2}.size(0);  // the larger half
  const size_t k = chunks_of(half);
  if (k <= 2) return std::nullopt;  // no pipeline to speak of (and no shorter call to price)
  const size_t k1 = short_chunks(name, d);
  if (k <= k1 + 1) return std::nullopt;
  const size_t chunk = half / k;  // the real chunks hold this many elements or one more
  if (chunks_of(k1 * chunk) != k1 || chunks_of((k1 + 1) * chunk) != k1 + 1) return std::nullopt;
  const auto pair = short_pair(name, d, chunk, k1, elem, links, model, walk);
  const Prediction &a = pair->a, &b = pair->b;
  if (!a.applicable || !b.applicable || a.rank_seconds.size() != b.rank_seconds.size()) return std::nullopt;
  // Per chunk beyond K1: what one more chunk adds (the short pipelines' chunks are all alike,
  // and both are in the steady state).
  const double more = static_cast<double>(k - k1);
  auto carry = [more](double at_k1, double at_2k1) { return at_k1 + more * (at_2k1 - at_k1); };
  auto carry_u = [&](uint64_t x, uint64_t y) {
    return static_cast<uint64_t>(carry(static_cast<double>(x), static_cast<double>(y)));
  };
  Prediction p = a;
  p.rank_seconds.clear();
  p.critical_rank = -1;
  for (size_t i = 0; i < a.rank_seconds.size(); ++i) {
    if (a.rank_seconds[i].first != b.rank_seconds[i].first) return std::nullopt;
    const double t = carry(a.rank_seconds[i].second, b.rank_seconds[i].second);
    p.rank_seconds.emplace_back(a.rank_seconds[i].first, t);
    if (p.critical_rank < 0 || t > p.seconds) {
      p.seconds = t;
      p.critical_rank = a.rank_seconds[i].first;
    }
  }
  p.steps = static_cast<size_t>(carry_u(a.steps, b.steps));
  p.max_rank_bytes_sent = carry_u(a.max_rank_bytes_sent, b.max_rank_bytes_sent);
  p.max_link_bytes = carry_u(a.max_link_bytes, b.max_link_bytes);
  p.max_host_tcp_bytes = carry_u(a.max_host_tcp_bytes, b.max_host_tcp_bytes);
  return p;
}

}  // namespace hoop::tuner
