// Statistics and the last algorithm, read once the operations in flight are done.
#include "comm/comm_impl.h"

#include "comm/link_params.h"
#include "comm/p2p_engine.h"

namespace hoop::detail {

CommStats CommImpl::stats() {
  std::unique_lock lk(mu_);
  cv_.wait(lk, [&] { return !busy_ && queue_.empty(); });
  CommStats s;
  s.ops = ops_done_ + p2p_->ops_done();
  const LinkTarget target{*job_, comm_id_, rank_, peers_, transport_mode_};
  for (size_t p = 0; p < links_.size(); ++p) {
    const int peer = static_cast<int>(p);
    const bool collective = !links_[p].empty() && links_[p][0];
    LinkStats l;
    l.peer = peer;
    // Point-to-point traffic runs on links of its own: counted with the collectives'.
    l.bytes_sent = counters_[p].sent + p2p_->bytes_sent(peer);
    l.bytes_received = counters_[p].received + p2p_->bytes_received(peer);
    if (!collective && l.bytes_sent == 0 && l.bytes_received == 0) continue;
    l.transport = std::string(collective ? links_[p][0]->kind() : target.transport(peer).name);
    s.bytes_sent += l.bytes_sent;
    s.bytes_received += l.bytes_received;
    s.links.push_back(l);
  }
  return s;
}

void CommImpl::reset_stats() {
  std::unique_lock lk(mu_);
  cv_.wait(lk, [&] { return !busy_ && queue_.empty(); });
  for (auto& c : counters_) c = {};
  p2p_->reset_counters();
  ops_done_ = 0;
}

std::string CommImpl::last_algorithm() {
  std::unique_lock lk(mu_);
  cv_.wait(lk, [&] { return !busy_ && queue_.empty(); });
  return last_algorithm_;
}

}  // namespace hoop::detail
