// Failure propagation: the first failure of a communicator is recorded in the store, so every
// rank reports it, and the links are poisoned so no peer waits for this rank any longer.
#include "comm/comm_impl.h"

#include <fmt/format.h>

#include "comm/p2p_engine.h"
#include "core/log.h"
#include "direct/direct_comm.h"

namespace hoop::detail {

void CommImpl::fail(const Error& e) {
  const std::string mine = e.what();
  std::string first;
  try {
    const std::string key = fmt::format("hoop/c{:x}/error", comm_id_);
    const Bytes now = job_->store->compare_set(key, Bytes{}, Bytes(mine.begin(), mine.end()));
    first.assign(now.begin(), now.end());
  } catch (...) {
    // The store may be gone with the rank that served it: the local error says enough.
  }
  Error out = e;
  const bool consequence = e.code() == ErrorCode::peer_failure || e.code() == ErrorCode::timeout;
  if (consequence && !first.empty() && first != mine) {
    out = Error(e.code(), fmt::format("{} [first failure in this communicator: {}]", e.detail(), first),
                e.context());
  }
  failure_ = out;
  poison_links(out.what());
  HOOP_WARN("{}", out.what());
  throw out;
}

void CommImpl::poison_links(const std::string& reason) noexcept {
  if (direct_) direct_->poison(reason);
  for (auto& per_channel : links_) {
    for (auto& l : per_channel) {
      if (l) l->poison(reason);
    }
  }
}

void CommImpl::abort(const std::string& reason) {
  abort_flag_.store(true);
  waiter_.interrupt();
  p2p_->abort(reason);
  std::lock_guard lk(mu_);
  if (!busy_) poison_links(fmt::format("rank {} aborted the communicator: {}", rank_, reason));
}

}  // namespace hoop::detail
