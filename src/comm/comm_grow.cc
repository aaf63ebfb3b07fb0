// Communicator::grow, the members' half of growing (comm_grow.h); the newcomers' half is
// Communicator::join (init.cc).
#include "comm/comm_grow.h"

#include <fmt/format.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "bootstrap/store_values.h"
#include "bootstrap/timed_store.h"
#include "core/errors.h"
#include "core/hash.h"
#include "core/log.h"
#include "tuner/cost_model.h"

namespace hoop::detail {

std::string grow_newcomer_key(int64_t ticket) { return fmt::format("hoop/grow/newcomer/{}", ticket); }
std::string grow_placed_key(int64_t ticket) { return fmt::format("hoop/grow/placed/{}", ticket); }

std::string encode_placement(const GrowPlacement& p) {
  nlohmann::json j;
  j["comm_id"] = p.comm_id;
  j["rank"] = p.rank;
  std::vector<std::string> peers;
  for (const auto& peer : p.peers) peers.push_back(encode_peer_info(peer));
  j["peers"] = peers;
  j["cost_model"] = p.cost_model;
  j["transport"] = p.transport;
  j["timeout_ms"] = p.timeout.count();
  return j.dump();
}

GrowPlacement decode_placement(const std::string& text) {
  try {
    const auto j = nlohmann::json::parse(text);
    GrowPlacement p;
    p.comm_id = j.at("comm_id").get<uint64_t>();
    p.rank = j.at("rank").get<int>();
    for (const auto& s : j.at("peers").get<std::vector<std::string>>()) p.peers.push_back(decode_peer_info(s));
    p.cost_model = j.at("cost_model").get<std::string>();
    p.transport = j.at("transport").get<std::string>();
    p.timeout = std::chrono::milliseconds(j.at("timeout_ms").get<int64_t>());
    return p;
  } catch (const nlohmann::json::exception& e) {
    throw_error(ErrorCode::protocol, fmt::format("malformed grow placement: {}", e.what()), ErrorContext{.op = "join"});
  }
}

int64_t CommImpl::waiting_newcomers() {
  Store& store = *job_->store;
  return std::max<int64_t>(0, store.add(kGrowTickets, 0) - store.add(kGrowTaken, 0));
}

std::shared_ptr<Communicator> CommImpl::grow(int k) {
  const ErrorContext ctx{rank_, "grow", 0, -1};
  HOOP_CHECK_ARG(k >= 0, ctx, "grow({}): the number of newcomers cannot be negative", k);
  uint64_t g;
  {
    std::lock_guard lk(mu_);
    g = ++grow_count_;
  }
  Store& store = *job_->store;
  // Rank 0 takes the next k tickets; the members learn which over their own links.
  int64_t first = 0;
  if (rank_ == 0) first = store.add(kGrowTaken, k) - k + 1;
  OpTask bcast;
  bcast.desc.op = OpType::broadcast;
  bcast.desc.count = 1;
  bcast.desc.nranks = size();
  bcast.desc.root = 0;
  bcast.dtype = DataType::i64;
  bcast.send = &first;
  bcast.recv = &first;
  bcast.desc.in_place = true;
  submit(std::move(bcast), true);

  std::vector<std::string> keys;
  for (int i = 0; i < k; ++i) keys.push_back(grow_newcomer_key(first + i));
  auto* timed = dynamic_cast<bootstrap::TimedStore*>(&store);
  try {
    if (timed) {
      timed->wait_within(keys, timeout());
    } else {
      store.wait(keys);
    }
  } catch (const Error& e) {
    if (e.code() != ErrorCode::timeout) throw;
    throw_error(ErrorCode::timeout,
                fmt::format("grow({}): the newcomers with tickets {}..{} did not all arrive within {:.3g} s",
                            k, first, first + k - 1, timeout().count() / 1000.0),
                ctx);
  }
  std::vector<PeerInfo> peers = peers_;
  for (const auto& key : keys) peers.push_back(decode_peer_info(store.get_string(key)));
  const uint64_t id = fnv1a64(fmt::format("{:x}/grow/{}", comm_id_, g)) | 1;
  if (rank_ == 0) {
    GrowPlacement p;
    p.comm_id = id;
    p.peers = peers;
    p.cost_model = job_->cost_model ? tuner::to_json(*job_->cost_model) : std::string();
    p.transport = transport_mode_;
    p.timeout = timeout();
    for (int i = 0; i < k; ++i) {
      p.rank = size() + i;
      store.set_string(grow_placed_key(first + i), encode_placement(p));
    }
  }
  HOOP_INFO("rank {}: grow #{} adds {} rank(s) (tickets {}..{}): {} ranks", rank_, g, k, first, first + k - 1,
            peers.size());
  CommOptions opts;
  opts.timeout = timeout();
  opts.transport = transport_mode_;
  return std::make_shared<Communicator>(std::make_unique<CommImpl>(job_, id, rank_, std::move(peers), opts));
}

}  // namespace hoop::detail
