// Creating the world communicator: agree on a job id, publish who we are and how to reach us,
// meet the others in the store, then gather everyone's record over the bootstrap ring
// (bootstrap_ring.h).
#include <unistd.h>

#include <fmt/ranges.h>

#include <random>

#include "bootstrap/env_init.h"
#include "bootstrap/host_id.h"
#include "bootstrap/store_errors.h"
#include "bootstrap/timed_store.h"
#include "comm/bootstrap_ring.h"
#include "comm/comm_grow.h"
#include "comm/comm_access.h"
#include "comm/comm_impl.h"
#include "core/errors.h"
#include "core/log.h"
#include "tuner/cost_model.h"

namespace hoop {

namespace {

std::string random_job_id() {
  std::random_device rd;
  std::mt19937_64 gen((static_cast<uint64_t>(rd()) << 32) ^ rd() ^ static_cast<uint64_t>(::getpid()));
  return fmt::format("{:012x}", gen() & 0xffffffffffffull);
}

// One listener per process and job, shared by every communicator of that job.
std::shared_ptr<transport::TcpListener> listener_for(const std::string& job_id) {
  static std::mutex mu;
  static std::weak_ptr<transport::TcpListener> current;
  static std::string current_job;
  std::lock_guard lk(mu);
  if (auto l = current.lock(); l && current_job == job_id) return l;
  auto l = std::make_shared<transport::TcpListener>(job_id);
  current = l;
  current_job = job_id;
  return l;
}

constexpr int kRendezvousAttempts = 3;

std::string peer_key(int rank) { return fmt::format("hoop/c0/peer/{}", rank); }

// The ranks whose record is not in the store (the first few), for the error of a rank that
// waited for them in vain: a failure path, where reading N keys is fine.
std::string absent_ranks(Store& store, int size) {
  constexpr int kNamed = 8;
  std::vector<int> absent;
  int more = 0;
  for (int r = 0; r < size; ++r) {
    if (store.check(peer_key(r))) continue;
    if (static_cast<int>(absent.size()) < kNamed) {
      absent.push_back(r);
    } else {
      ++more;
    }
  }
  return fmt::format("rank{} {}{}", absent.size() == 1 ? "" : "s", fmt::join(absent, ", "),
                     more > 0 ? fmt::format(" and {} more", more) : "");
}

// What the ranks meet on in the store; the rest of the table travels the bootstrap ring.
struct Meeting {
  detail::PeerInfo prev, next;
};

// Agrees on the job id, publishes this rank's record, waits until every rank has published
// (one counter and one key: a store that dies meanwhile is an error on every waiting rank) and
// reads its two ring neighbours' records. O(1) store requests per rank, whatever N is.
Meeting meet_in_store(const InitParams& params, detail::JobContext& job, detail::PeerInfo& me) {
  if (job.job_id.empty()) {
    // Rank 0 proposes; whatever the store holds first wins.
    const std::string proposal = params.rank == 0 ? random_job_id() : std::string();
    if (params.rank == 0) {
      const Bytes v = job.store->compare_set("hoop/job_id", Bytes{}, Bytes(proposal.begin(), proposal.end()));
      job.job_id.assign(v.begin(), v.end());
    } else {
      job.job_id = job.store->get_string("hoop/job_id");
    }
  }
  job.listener = listener_for(job.job_id);

  me.host_id = bootstrap::host_id();
  me.machine_id = bootstrap::machine_id();
  me.pid = static_cast<int>(::getpid());
  me.tcp = job.listener->addresses();
  job.store->set_string(peer_key(params.rank), detail::encode_peer_info(me));
  Meeting m;
  if (params.size == 1) return m;
  // A count past N (a rank that repeated its attempt after a broken connection) opens the gate
  // early; harmless, since a neighbour's record is waited for by its own get.
  if (job.store->add("hoop/c0/arrived", 1) >= params.size) job.store->set_string("hoop/c0/all_arrived", "1");
  try {
    job.store->wait({"hoop/c0/all_arrived"});
  } catch (const Error& e) {
    if (e.code() != ErrorCode::timeout) throw;
    throw_error(ErrorCode::timeout, fmt::format("{} (not arrived: {})", e.detail(), absent_ranks(*job.store, params.size)),
                e.context());
  }
  const int prev = (params.rank + params.size - 1) % params.size, next = (params.rank + 1) % params.size;
  m.next = detail::decode_peer_info(job.store->get_string(peer_key(next)));
  m.prev = prev == next ? m.next : detail::decode_peer_info(job.store->get_string(peer_key(prev)));
  return m;
}

}  // namespace

std::shared_ptr<Communicator> Communicator::create(const InitParams& params, CommOptions opts) {
  const ErrorContext ctx{params.rank, "init", 0, -1};
  if (params.size < 1 || params.rank < 0 || params.rank >= params.size) {
    throw_error(ErrorCode::invalid_argument,
                fmt::format("rank {} / size {} is not a valid rank of a group", params.rank, params.size), ctx);
  }
  if (!params.store) throw_error(ErrorCode::invalid_argument, "InitParams::store is null", ctx);
  log::set_rank(params.rank);
  auto job = std::make_shared<detail::JobContext>();
  job->store = params.store;
  job->job_id = params.job_id;
  const auto ring_timeout = detail::comm_timeout(opts);  // a bad HOOP_TIMEOUT fails here, before the store
  std::vector<detail::PeerInfo> peers;
  detail::PeerInfo me;
  const TimePoint start = Clock::now();
  Meeting meeting;
  try {
    // Every step in the store may be repeated: when the store's connection breaks (its host
    // died or it restarted), try again on a new connection; the client makes it within its
    // connection retry budget, whose error ends the attempts.
    for (int attempt = 1;; ++attempt) {
      try {
        meeting = meet_in_store(params, *job, me);
        break;
      } catch (const bootstrap::StoreConnectionBroken& e) {
        if (attempt >= kRendezvousAttempts) throw;
        HOOP_WARN("init: {}; trying again ({} of {})", e.what(), attempt + 1, kRendezvousAttempts);
      }
    }
  } catch (const Error& e) {
    if (e.code() == ErrorCode::invalid_argument) throw;
    // A store that dies or stops answering during init: one init error that says so.
    throw_error(ErrorCode::init,
                fmt::format("rendezvous through the store failed ({}): {}", to_string(e.code()), e.what()),
                ctx);
  }
  const TimePoint ring_deadline = Clock::now() + ring_timeout;
  try {
    const detail::RingSeat seat{params.rank, params.size, me, meeting.prev, meeting.next};
    peers = detail::ring_allgather_peers(*job->listener, seat, ring_deadline);
  } catch (const Error& e) {
    throw_error(ErrorCode::init,
                fmt::format("exchanging the peer table over the bootstrap ring failed ({}): {}",
                            to_string(e.code()), e.detail()),
                ErrorContext{params.rank, "init", 0, e.peer()});
  }
  HOOP_INFO("rank {} of {} up (job {}, host {}, tcp {}) in {:.1f} ms", params.rank, params.size, job->job_id,
            me.host_id, fmt::join(me.tcp, " "), seconds_between(start, Clock::now()) * 1e3);
  auto comm = std::make_shared<Communicator>(
      std::make_unique<detail::CommImpl>(std::move(job), 0, params.rank, std::move(peers), opts));
  detail::CommAccess::impl(*comm).calibrate(*comm);
  return comm;
}

std::shared_ptr<Communicator> Communicator::join(const JoinParams& params, CommOptions opts) {
  const ErrorContext ctx{-1, "join", 0, -1};
  if (!params.store) throw_error(ErrorCode::invalid_argument, "JoinParams::store is null", ctx);
  const auto limit = detail::comm_timeout(opts);
  auto job = std::make_shared<detail::JobContext>();
  job->store = params.store;
  job->job_id = params.job_id.empty() ? params.store->get_string("hoop/job_id") : params.job_id;
  job->listener = listener_for(job->job_id);
  detail::PeerInfo me;
  me.host_id = bootstrap::host_id();
  me.machine_id = bootstrap::machine_id();
  me.pid = static_cast<int>(::getpid());
  me.tcp = job->listener->addresses();
  const int64_t ticket = params.store->add(detail::kGrowTickets, 1);
  params.store->set_string(detail::grow_newcomer_key(ticket), detail::encode_peer_info(me));
  std::string placed;
  try {
    const std::string key = detail::grow_placed_key(ticket);
    auto* timed = dynamic_cast<bootstrap::TimedStore*>(params.store.get());
    const Bytes v = timed ? timed->get_within(key, limit) : params.store->get(key);
    placed.assign(v.begin(), v.end());
  } catch (const Error& e) {
    if (e.code() != ErrorCode::timeout) throw;
    throw_error(ErrorCode::timeout,
                fmt::format("no communicator of job {} grew to take ticket {} within {:.3g} s", job->job_id,
                            ticket, limit.count() / 1000.0),
                ctx);
  }
  const detail::GrowPlacement p = detail::decode_placement(placed);
  log::set_rank(p.rank);
  if (!p.cost_model.empty()) job->cost_model = std::make_shared<const tuner::CostModel>(tuner::model_from_json(p.cost_model));
  // The members' transport and timeout, unless this process asks for its own.
  if (!opts.transport) opts.transport = p.transport;
  if (!opts.timeout) opts.timeout = p.timeout;
  HOOP_INFO("joined job {} as rank {} of {} (ticket {})", job->job_id, p.rank, p.peers.size(), ticket);
  return std::make_shared<Communicator>(
      std::make_unique<detail::CommImpl>(std::move(job), p.comm_id, p.rank, p.peers, opts));
}

std::shared_ptr<Communicator> Communicator::from_env(CommOptions opts) {
  const bootstrap::EnvInit e = bootstrap::read_init_env();
  InitParams p;
  p.rank = e.rank;
  p.size = e.size;
  p.local_rank = e.local_rank;
  p.job_id = e.job_id;
  if (!e.store_external && e.rank == 0) {
    // Rank 0 serves the store for the job's lifetime (the process's, in practice).
    static std::unique_ptr<TcpStoreServer> server;
    if (!server) server = std::make_unique<TcpStoreServer>("", e.store_port);
    p.store = connect_tcp_store("127.0.0.1", e.store_port);
  } else {
    p.store = connect_tcp_store(e.store_host, e.store_port);
  }
  HOOP_INFO("init from {} environment: rank {} of {}, store {}:{}", e.source, e.rank, e.size,
            e.store_host, e.store_port);
  return create(p, std::move(opts));
}

}  // namespace hoop
