// The bootstrap ring (see bootstrap_ring.h). One frame per record: the origin rank and the
// length (two little-endian u32), then the record's JSON text. Frames from the predecessor
// arrive in a fixed order: the k-th carries rank (r - 1 - k) mod N; anything else is refused.
#include "comm/bootstrap_ring.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <optional>

#include "core/errors.h"
#include "core/log.h"
#include "transport/shm/process_liveness.h"
#include "transport/tcp/socket_options.h"
#include "transport/tcp/tcp_connector.h"
#include "transport/tcp/tcp_link.h"
#include "transport/tcp/unique_fd.h"
#include "transport/waiter.h"

namespace hoop::detail {

namespace {

constexpr uint32_t kAbortOrigin = 0xffffffffu;  // a frame carrying a failure's text
constexpr uint32_t kMaxFrameText = 1u << 16;    // a record is a few hundred bytes
constexpr size_t kFrameHead = 8;
constexpr size_t kRingStagingBytes = 64 * 1024;  // the links' receive staging (not 4 MiB)
constexpr milliseconds kLivenessSlice{100};

void append_frame(std::vector<std::byte>& out, uint32_t origin, std::string_view text) {
  const auto len = static_cast<uint32_t>(text.size());
  const size_t at = out.size();
  out.resize(at + kFrameHead + text.size());
  std::memcpy(out.data() + at, &origin, 4);
  std::memcpy(out.data() + at + 4, &len, 4);
  std::memcpy(out.data() + at + kFrameHead, text.data(), text.size());
}

class RingExchange {
 public:
  RingExchange(transport::TcpListener& listener, const RingSeat& seat, TimePoint deadline)
      : listener_(listener),
        seat_(seat),
        prev_rank_((seat.rank + seat.size - 1) % seat.size),
        next_rank_((seat.rank + 1) % seat.size),
        deadline_(deadline),
        table_(static_cast<size_t>(seat.size)) {
    transport::TcpLinkParams p;
    p.comm_id = 0;
    p.my_rank = seat.rank;
    p.peer_rank = next_rank_;
    p.channel = kBootstrapChannel;
    p.peer_addresses = seat.next.tcp;
    p.same_host = seat.next.host_id == seat.me.host_id;
    p.staging_bytes = kRingStagingBytes;
    connector_ = std::make_unique<transport::TcpConnector>(listener_, std::move(p));
    table_[static_cast<size_t>(seat.rank)] = seat.me;
    append_frame(out_, static_cast<uint32_t>(seat.rank), encode_peer_info(seat.me));
  }

  std::vector<PeerInfo> run() {
    try {
      while (!done()) {
        if (!step()) sleep();
      }
    } catch (const Error& e) {
      pass_on_failure(e);
      throw;
    }
    std::vector<PeerInfo> peers;
    peers.reserve(table_.size());
    for (auto& p : table_) peers.push_back(std::move(*p));
    return peers;
  }

 private:
  int expected_origin() const { return (seat_.rank - 1 - received_ + 2 * seat_.size) % seat_.size; }
  bool all_received() const { return received_ == seat_.size - 1; }
  bool all_sent() const { return tx_ && sent_ == out_.size(); }
  bool done() const { return all_received() && all_sent(); }
  ErrorContext ctx(int peer) const { return ErrorContext{seat_.rank, "init", 0, peer}; }

  // Moves whatever can move now; false when nothing did.
  bool step() {
    bool moved = false;
    if (!tx_ && (tx_ = connector_->advance())) moved = true;
    if (!rx_) {
      const int fd = listener_.try_accept(0, prev_rank_, seat_.rank, kBootstrapChannel);
      if (fd >= 0) {
        transport::tcp::UniqueFd owned(fd);
        transport::tcp::configure_link_socket(owned.get());
        rx_ = std::make_unique<transport::tcp::TcpLink>(std::move(owned), seat_.rank, prev_rank_,
                                                        kRingStagingBytes);
        moved = true;
      }
    }
    if (tx_ && sent_ < out_.size()) {
      const size_t n = tx_->write_some(out_.data() + sent_, out_.size() - sent_);
      sent_ += n;
      moved |= n > 0;
    }
    if (rx_ && !all_received()) {
      const auto bytes = rx_->readable();
      if (!bytes.empty()) {
        in_.insert(in_.end(), bytes.begin(), bytes.end());
        rx_->consume(bytes.size());
        parse_frames();
        moved = true;
      }
    }
    return moved;
  }

  void parse_frames() {
    while (in_.size() - in_at_ >= kFrameHead && !all_received()) {
      uint32_t origin = 0, len = 0;
      std::memcpy(&origin, in_.data() + in_at_, 4);
      std::memcpy(&len, in_.data() + in_at_ + 4, 4);
      if (len > kMaxFrameText) {
        throw_error(ErrorCode::protocol,
                    fmt::format("rank {} sent a bootstrap frame of {} bytes (at most {})", prev_rank_, len,
                                kMaxFrameText),
                    ctx(prev_rank_));
      }
      if (in_.size() - in_at_ - kFrameHead < len) break;
      const std::string text(reinterpret_cast<const char*>(in_.data() + in_at_ + kFrameHead), len);
      if (origin == kAbortOrigin) {
        throw_error(ErrorCode::peer_failure, fmt::format("the bootstrap ring failed before rank {}: {}", prev_rank_, text),
                    ctx(prev_rank_));
      }
      if (origin != static_cast<uint32_t>(expected_origin())) {
        throw_error(ErrorCode::protocol,
                    fmt::format("rank {} passed on the record of rank {} where rank {}'s was due", prev_rank_,
                                origin, expected_origin()),
                    ctx(prev_rank_));
      }
      table_[origin] = decode_peer_info(text);
      // Everyone but the successor still needs it; the successor has its own.
      if (static_cast<int>(origin) != next_rank_) append_frame(out_, origin, text);
      ++received_;
      in_at_ += kFrameHead + len;
    }
    if (in_at_ > 0 && in_at_ * 2 >= in_.size()) {
      in_.erase(in_.begin(), in_.begin() + static_cast<std::ptrdiff_t>(in_at_));
      in_at_ = 0;
    }
  }

  // Sleeps until a socket moves (at most kLivenessSlice), then checks the deadline and that the
  // neighbours this rank still waits for are alive.
  void sleep() {
    waiter_.reset();
    bool may_sleep = true;
    TimePoint until = std::min(deadline_, Clock::now() + kLivenessSlice);
    if (!tx_) {
      connector_->arm(waiter_);
      until = std::min(until, std::max(connector_->retry_at(), Clock::now()));
    } else if (sent_ < out_.size()) {
      may_sleep &= tx_->arm(waiter_, false, true);
    }
    if (!rx_) {
      listener_.arm(waiter_);
    } else if (!all_received()) {
      may_sleep &= rx_->arm(waiter_, true, false);
    }
    if (may_sleep) waiter_.wait(std::max<nanoseconds>(until - Clock::now(), nanoseconds{0}));
    if (tx_) tx_->disarm();
    if (rx_) rx_->disarm();
    check_neighbours();
  }

  void check_neighbours() {
    const bool need_prev = !all_received();
    const bool need_next = !all_sent();
    if (need_prev && rx_) rx_->check_peer_alive();
    if (need_next && tx_) tx_->check_peer_alive();
    // Once connected, the socket speaks for the peer: a peer that sent everything and exited
    // left its bytes in it.
    if (need_prev && !rx_) check_process(seat_.prev, prev_rank_, prev_alive_);
    if (need_next && !tx_) check_process(seat_.next, next_rank_, next_alive_);
    if (Clock::now() < deadline_) return;
    std::string what;
    if (!tx_) {
      what = fmt::format("rank {} (the successor) did not accept the bootstrap connection", next_rank_);
    } else if (!rx_) {
      what = fmt::format("rank {} (the predecessor) did not connect", prev_rank_);
    } else if (!all_received()) {
      what = fmt::format("rank {} passed on {} of the {} records", prev_rank_, received_, seat_.size - 1);
    } else {
      what = fmt::format("rank {} did not take the last {} bytes", next_rank_, out_.size() - sent_);
    }
    throw_error(ErrorCode::timeout, "bootstrap ring timed out: " + what, ctx(need_prev ? prev_rank_ : next_rank_));
  }

  // A neighbour on this host whose process is gone before it connected fails the exchange at
  // once (on another host the deadline does).
  void check_process(const PeerInfo& p, int rank, transport::shm::ProcessLiveness& liveness) {
    if (p.host_id != seat_.me.host_id || p.pid <= 0) return;
    if (!liveness.alive(p.pid)) {
      throw_error(ErrorCode::peer_failure,
                  fmt::format("rank {} (pid {}) died during the bootstrap", rank, p.pid), ctx(rank));
    }
  }

  // Best effort, without waiting: the failure's text to the successor, after the frame under way.
  void pass_on_failure(const Error& e) noexcept {
    try {
      if (!tx_ || seat_.size < 3) return;  // with two ranks the successor is the one at fault
      if (e.code() == ErrorCode::peer_failure && e.peer() == next_rank_) return;
      append_frame(out_, kAbortOrigin,
                   e.detail().rfind("the bootstrap ring failed", 0) == 0
                       ? e.detail()
                       : fmt::format("rank {}: {}", seat_.rank, e.detail()));
      while (sent_ < out_.size()) {
        const size_t n = tx_->write_some(out_.data() + sent_, out_.size() - sent_);
        if (n == 0) break;
        sent_ += n;
      }
    } catch (...) {
    }
  }

  transport::TcpListener& listener_;
  const RingSeat& seat_;
  const int prev_rank_, next_rank_;
  const TimePoint deadline_;
  std::unique_ptr<transport::TcpConnector> connector_;
  std::unique_ptr<transport::Link> tx_, rx_;
  std::vector<std::byte> out_, in_;
  size_t sent_ = 0, in_at_ = 0;
  int received_ = 0;
  std::vector<std::optional<PeerInfo>> table_;
  transport::Waiter waiter_;
  transport::shm::ProcessLiveness prev_alive_, next_alive_;
};

}  // namespace

std::vector<PeerInfo> ring_allgather_peers(transport::TcpListener& listener, const RingSeat& seat,
                                           TimePoint deadline) {
  if (seat.size == 1) return {seat.me};
  const TimePoint start = Clock::now();
  auto peers = RingExchange(listener, seat, deadline).run();
  HOOP_INFO("bootstrap ring: {} records in {:.1f} ms", seat.size, seconds_between(start, Clock::now()) * 1e3);
  return peers;
}

}  // namespace hoop::detail
