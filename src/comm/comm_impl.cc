#include "comm/comm_impl.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "comm/algo_choice.h"
#include "engine/timeline.h"
#include "core/env.h"
#include "core/errors.h"
#include "core/hash.h"
#include "core/log.h"
#include "direct/direct_comm.h"
#include "kernels/reduce.h"
#include "transport/shm/shm_transport.h"

namespace hoop::detail {

using schedule::CollectiveDesc;

namespace {

std::chrono::milliseconds default_timeout(const CommOptions& opts) {
  if (opts.timeout) return *opts.timeout;
  if (auto t = env::get_seconds("HOOP_TIMEOUT")) return *t;
  return std::chrono::seconds(300);
}

std::string transport_mode(const CommOptions& opts) {
  std::string m = opts.transport ? *opts.transport : env::get_or("HOOP_TRANSPORT", "auto");
  if (m != "auto" && m != "shm" && m != "tcp") {
    throw_error(ErrorCode::invalid_argument,
                fmt::format("unknown transport '{}' (HOOP_TRANSPORT: auto, shm or tcp)", m));
  }
  return m;
}

bool is_reducing(OpType op) {
  return op == OpType::allreduce || op == OpType::reducescatter || op == OpType::reduce;
}

bool is_half(DataType dt) { return dt == DataType::f16 || dt == DataType::bf16; }

// Header phase of the HOOP_CHECK=1 signature exchange.
constexpr uint8_t kSignaturePhase = 0x80;

}  // namespace

namespace {
// Position of `rank` among the ranks sharing its host, and how many share it.
int local_index(const std::vector<PeerInfo>& peers, int rank) {
  int idx = 0;
  for (int r = 0; r < rank; ++r) idx += peers[static_cast<size_t>(r)].host_id == peers[static_cast<size_t>(rank)].host_id;
  return idx;
}
int local_count(const std::vector<PeerInfo>& peers, int rank) {
  int n = 0;
  for (const auto& p : peers) n += p.host_id == peers[static_cast<size_t>(rank)].host_id;
  return n;
}
// Ranks running on the same machine as `rank`, whatever host they act as (network namespaces
// and HOOP_HOST_ID make separate hosts that still share this machine's cores).
int machine_count(const std::vector<PeerInfo>& peers, int rank) {
  int n = 0;
  for (const auto& p : peers) n += p.machine_id == peers[static_cast<size_t>(rank)].machine_id;
  return n;
}
schedule::Topology topology_of(const std::vector<PeerInfo>& peers) {
  std::vector<std::string> ids;
  ids.reserve(peers.size());
  for (const auto& p : peers) ids.push_back(p.host_id);
  return schedule::Topology::from_host_ids(ids);
}
}  // namespace

CommImpl::CommImpl(std::shared_ptr<JobContext> job, uint64_t comm_id, int rank,
                   std::vector<PeerInfo> peers, const CommOptions& opts)
    : job_(std::move(job)),
      comm_id_(comm_id),
      rank_(rank),
      peers_(std::move(peers)),
      local_rank_(local_index(peers_, rank_)),
      local_size_(local_count(peers_, rank_)),
      transport_mode_(transport_mode(opts)),
      timeout_ms_(default_timeout(opts).count()),
      topology_(topology_of(peers_)),
      links_(peers_.size()),
      engine_([this](int peer, int channel, TimePoint deadline) -> transport::Link& {
                return link(peer, channel, deadline);
              },
              waiter_, abort_flag_, engine::config_from_env(machine_count(peers_, rank_))),
      counters_(peers_.size()),
      signature_check_(env::get_int("HOOP_CHECK").value_or(0) != 0),
      sends_to_(peers_.size()),
      recvs_from_(peers_.size()) {
  if (auto* timeline = engine::Timeline::global()) {
    timeline->set_identity(rank_, size(), job_->job_id);
    timeline->claim(comm_id_);
  }
}

CommImpl::~CommImpl() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
  // The first communicator of the process writes the trace when it goes away.
  if (auto* timeline = engine::Timeline::global(); timeline && timeline->owns_identity(comm_id_)) {
    timeline->flush();
  }
}

// ---------------------------------------------------------------------------------------------
// Submission and issue order

Work CommImpl::submit(OpTask t, bool blocking) {
  std::unique_lock lk(mu_);
  validate(t);  // refused calls consume no sequence number: peers never see them
  t.desc.topology = &topology_;
  // Collectives are numbered on the communicator; point-to-point calls per peer and direction,
  // so the k-th send to a peer matches the peer's k-th receive from us.
  if (t.desc.op == OpType::send) {
    t.seq = ++sends_to_[static_cast<size_t>(t.desc.root)];
  } else if (t.desc.op == OpType::recv) {
    t.seq = ++recvs_from_[static_cast<size_t>(t.desc.root)];
  } else {
    t.seq = ++next_seq_;
  }
  if (blocking && queue_.empty() && !busy_) {
    // Fast path: nothing queued, run on the caller's thread. A blocking call has no handle to
    // give back (its caller discards it), so none is made.
    busy_ = true;
    lk.unlock();
    std::exception_ptr error;
    try {
      execute(t);
    } catch (...) {
      error = std::current_exception();
    }
    lk.lock();
    busy_ = false;
    lk.unlock();
    cv_.notify_all();
    if (error) std::rethrow_exception(error);
    return Work();
  }
  auto state = std::make_shared<WorkState>(t.seq);
  t.work = state;
  queue_.push_back(std::move(t));
  if (!worker_.joinable()) worker_ = std::thread([this] { worker_loop(); });
  lk.unlock();
  cv_.notify_all();
  Work w(state);
  if (blocking) w.wait();
  return w;
}

void CommImpl::worker_loop() {
  std::unique_lock lk(mu_);
  for (;;) {
    cv_.wait(lk, [&] { return (stop_ && queue_.empty()) || (!queue_.empty() && !busy_); });
    if (queue_.empty()) return;
    OpTask t = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lk.unlock();
    run_task(t);
    lk.lock();
    busy_ = false;
    cv_.notify_all();
  }
}

void CommImpl::run_task(OpTask& t) {
  std::exception_ptr error;
  try {
    execute(t);
  } catch (...) {
    error = std::current_exception();
  }
  t.work->finish(error);
}

// ---------------------------------------------------------------------------------------------
// Argument checks

namespace {

bool overlaps(const void* a, size_t abytes, const void* b, size_t bbytes) {
  if (!a || !b || abytes == 0 || bbytes == 0) return false;
  auto pa = reinterpret_cast<uintptr_t>(a), pb = reinterpret_cast<uintptr_t>(b);
  return pa < pb + bbytes && pb < pa + abytes;
}

}  // namespace

void CommImpl::validate(const OpTask& t) const {
  const auto& d = t.desc;
  const ErrorContext ctx{rank_, std::string(to_string(d.op)), 0, -1};
  const int n = size();
  HOOP_CHECK_ARG(is_valid(t.dtype), ctx, "unknown dtype value {}", static_cast<int>(t.dtype));
  if (is_reducing(d.op)) {
    HOOP_CHECK_ARG(is_valid(d.redop), ctx, "unknown reduction op value {}", static_cast<int>(d.redop));
  }
  if (d.op == OpType::broadcast || d.op == OpType::reduce) {
    HOOP_CHECK_ARG(d.root >= 0 && d.root < n, ctx, "root {} is out of range [0, {})", d.root, n);
  }
  if (d.op == OpType::send || d.op == OpType::recv) {
    HOOP_CHECK_ARG(d.root >= 0 && d.root < n, ctx, "peer {} is out of range [0, {})", d.root, n);
    HOOP_CHECK_ARG(d.root != rank_, ctx, "peer {} is this rank itself", d.root);
  }
  const size_t es = dtype_size(t.dtype);
  const size_t mult = (d.op == OpType::reducescatter || d.op == OpType::allgather) ? static_cast<size_t>(n) : 1;
  HOOP_CHECK_ARG(d.count <= std::numeric_limits<size_t>::max() / es / mult / 2, ctx,
                 "count {} of {} overflows the address space", d.count, to_string(t.dtype));
  const size_t one = d.count * es, all = one * mult;
  size_t send_bytes = 0, recv_bytes = 0;
  switch (d.op) {
    case OpType::allreduce: send_bytes = one; recv_bytes = one; break;
    case OpType::reducescatter: send_bytes = all; recv_bytes = one; break;
    case OpType::allgather: send_bytes = one; recv_bytes = all; break;
    case OpType::broadcast: send_bytes = rank_ == d.root ? one : 0; recv_bytes = one; break;
    case OpType::reduce: send_bytes = one; recv_bytes = rank_ == d.root ? one : 0; break;
    case OpType::send: send_bytes = one; break;
    case OpType::recv: recv_bytes = one; break;
    case OpType::barrier: break;
  }
  HOOP_CHECK_ARG(send_bytes == 0 || t.send, ctx, "send buffer is null (count {})", d.count);
  HOOP_CHECK_ARG(recv_bytes == 0 || t.recv, ctx, "recv buffer is null (count {})", d.count);
  if (send_bytes && recv_bytes && !d.in_place) {
    HOOP_CHECK_ARG(!overlaps(t.send, send_bytes, t.recv, recv_bytes), ctx,
                   "send and recv buffers overlap without being in place (in place means {})",
                   d.op == OpType::reducescatter ? "recv == send + rank*recvcount"
                   : d.op == OpType::allgather   ? "send == recv + rank*sendcount"
                                                 : "send == recv");
  }
}

// ---------------------------------------------------------------------------------------------
// Execution

void CommImpl::execute(const OpTask& t) {
  const ErrorContext ctx{rank_, std::string(to_string(t.desc.op)), t.seq, -1};
  if (failure_) {
    try {
      std::rethrow_exception(failure_);
    } catch (const Error& e) {
      throw_error(e.code(), fmt::format("the communicator is unusable after an earlier failure: {}", e.what()), ctx);
    }
  }
  const auto timeout = t.opts.timeout.value_or(this->timeout());
  engine::OpIdentity id;
  id.op = t.desc.op;
  id.dtype = t.dtype;
  id.redop = t.desc.redop;
  id.count = t.desc.count;
  id.root = (t.desc.op == OpType::broadcast || t.desc.op == OpType::reduce || t.desc.op == OpType::send) ? t.desc.root : -1;
  if (t.desc.op == OpType::recv) id.root = t.desc.root;
  id.seq = t.seq;
  id.comm_id = comm_id_;
  id.rank = rank_;
  try {
    if (abort_flag_.load()) throw_error(ErrorCode::aborted, "the communicator was aborted", ctx);
    if (signature_check_ && t.desc.op != OpType::send && t.desc.op != OpType::recv) {
      engine::OpIdentity check = id;
      check.phase = kSignaturePhase;
      run_schedule(schedule::signature_ring(size(), rank_), t.dtype, engine::Buffers{}, check, timeout);
    }
    const AlgoChoice choice = choose_algorithm(t);
    std::string algo = choice.name;
    if (algo == direct::kAlgorithmName && direct_applicable(t)) {
      run_direct(t, timeout);
      ++ops_done_;
      return;
    }
    if (algo == direct::kAlgorithmName) algo.clear();  // forced, not applicable here: the default
    OpTask task = t;
    task.desc.nchannels = choice.nchannels;
    if (is_half(t.dtype) && is_reducing(t.desc.op)) {
      run_half_precision(task, algo, id, timeout);
    } else {
      const auto s = schedule::build(algo, task.desc, rank_);
      run_schedule(s, t.dtype, engine::Buffers{t.send, t.recv, nullptr}, id, timeout);
    }
    ++ops_done_;
  } catch (const Error& e) {
    if (e.code() == ErrorCode::invalid_argument) throw;
    fail(e);
  }
}

bool CommImpl::direct_applicable(const OpTask& t) const {
  return direct::supports(t.desc.op) && transport_mode_ != "tcp" && local_size_ == size();
}

void CommImpl::run_direct(const OpTask& t, std::chrono::milliseconds timeout) {
  if (!direct_) {
    direct::CommParams p;
    p.job_id = job_->job_id;
    p.comm_id = comm_id_;
    p.rank = rank_;
    p.nranks = size();
    for (const auto& peer : peers_) p.pids.push_back(static_cast<pid_t>(peer.pid));
    p.store = job_->store;
    p.spin = direct::SpinPolicy{engine_.config().spin, engine_.config().yield_while_spinning};
    direct_ = std::make_unique<direct::DirectComm>(std::move(p), waiter_, abort_flag_);
  }
  direct::Call c;
  c.op = t.desc.op;
  c.dtype = t.dtype;
  c.redop = t.desc.redop;
  c.count = t.desc.count;
  c.root = t.desc.root;
  c.send = t.send;
  c.recv = t.recv;
  c.seq = t.seq;
  HOOP_TRACE("{} #{}: {}", to_string(c.op), c.seq, direct::kAlgorithmName);
  direct_->run(c, timeout);
  last_algorithm_ = direct::kAlgorithmName;
}

void CommImpl::run_schedule(const schedule::RankSchedule& s, DataType elem, const engine::Buffers& bufs,
                            const engine::OpIdentity& id, std::chrono::milliseconds timeout) {
  engine::Buffers b = bufs;
  if (s.scratch_count > 0) b.scratch = scratch_.get(s.scratch_count * dtype_size(elem));
  HOOP_TRACE("{} #{}: {} ({} steps)", to_string(id.op), id.seq, s.algorithm, s.steps.size());
  engine_.run(s, elem, size(), b, id, timeout, counters_);
  last_algorithm_ = s.algorithm;
}

// f16/bf16 reductions accumulate in f32 and round once: inputs are widened into a staging
// buffer, reduced as f32, and the result narrowed. The ring AllReduce narrows each owned
// chunk before its AllGather phase, so the gather moves 16-bit data.
void CommImpl::run_half_precision(const OpTask& t, const std::string& algo, engine::OpIdentity id,
                                  std::chrono::milliseconds timeout) {
  const auto& d = t.desc;
  const int n = size();
  CollectiveDesc d32 = d;
  d32.in_place = true;
  const size_t es = dtype_size(t.dtype);
  auto* out = static_cast<std::byte*>(t.recv);
  switch (d.op) {
    case OpType::allreduce: {
      auto* f = static_cast<float*>(staging_.get(d.count * sizeof(float)));
      kernels::to_f32(f, t.send, t.dtype, d.count);
      const auto chosen = schedule::build(algo, d32, rank_);
      if (chosen.algorithm != "ring") {
        run_schedule(chosen, DataType::f32, {f, f, nullptr}, id, timeout);
        kernels::from_f32(out, t.dtype, f, d.count);
        return;
      }
      id.phase = 0;
      run_schedule(schedule::ring_allreduce(d32, rank_, schedule::RingPhases::reduce_scatter_only),
                   DataType::f32, {f, f, nullptr}, id, timeout);
      const schedule::Chunking chunks{d.count, n};
      const int owned = schedule::ring_allreduce_owned_chunk(rank_, n);
      const size_t off = chunks.offset(owned);
      kernels::from_f32(out + off * es, t.dtype, f + off, chunks.size(owned));
      id.phase = 1;
      run_schedule(schedule::ring_allreduce(d32, rank_, schedule::RingPhases::allgather_only),
                   t.dtype, {t.recv, t.recv, nullptr}, id, timeout);
      return;
    }
    case OpType::reducescatter: {
      const size_t total = d.count * static_cast<size_t>(n);
      auto* f = static_cast<float*>(staging_.get(total * sizeof(float)));
      kernels::to_f32(f, t.send, t.dtype, total);
      float* mine = f + static_cast<size_t>(rank_) * d.count;
      run_schedule(schedule::build(algo, d32, rank_), DataType::f32, {f, mine, nullptr}, id, timeout);
      kernels::from_f32(out, t.dtype, mine, d.count);
      return;
    }
    case OpType::reduce: {
      auto* f = static_cast<float*>(staging_.get(d.count * sizeof(float)));
      kernels::to_f32(f, t.send, t.dtype, d.count);
      run_schedule(schedule::build(algo, d32, rank_), DataType::f32, {f, f, nullptr}, id, timeout);
      if (rank_ == d.root) kernels::from_f32(out, t.dtype, f, d.count);
      return;
    }
    default:
      throw_error(ErrorCode::internal, "run_half_precision called for a non-reducing op");
  }
}

transport::Link& CommImpl::link(int peer, int channel, TimePoint deadline) {
  auto& per_channel = links_.at(static_cast<size_t>(peer));
  if (per_channel.size() <= static_cast<size_t>(channel)) per_channel.resize(static_cast<size_t>(channel) + 1);
  auto& slot = per_channel[static_cast<size_t>(channel)];
  if (slot) return *slot;
  const PeerInfo& p = peers_[static_cast<size_t>(peer)];
  const bool same_host = p.host_id == peers_[static_cast<size_t>(rank_)].host_id;
  const bool shm = transport_mode_ == "shm" || (transport_mode_ == "auto" && same_host);
  if (shm && !same_host) {
    throw_error(ErrorCode::invalid_argument,
                fmt::format("HOOP_TRANSPORT=shm but rank {} is on another host ({})", peer, p.host_id),
                ErrorContext{rank_, "connect", 0, peer});
  }
  if (shm) {
    transport::ShmLinkParams params;
    params.job_id = job_->job_id;
    params.comm_id = comm_id_;
    params.my_rank = rank_;
    params.peer_rank = peer;
    params.channel = channel;
    params.peer_pid = p.pid;
    slot = transport::shm_connect(params, deadline);
  } else {
    transport::TcpLinkParams params;
    params.comm_id = comm_id_;
    params.my_rank = rank_;
    params.peer_rank = peer;
    params.channel = channel;
    params.peer_addresses = p.tcp;
    params.same_host = same_host;
    slot = transport::tcp_connect(*job_->listener, params, deadline);
  }
  HOOP_INFO("communicator {:#x}: rank {} connected to rank {} (channel {}) over {}", comm_id_, rank_, peer,
            channel, slot->kind());
  return *slot;
}

// ---------------------------------------------------------------------------------------------
// Failure

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
  failure_ = std::make_exception_ptr(out);
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
  std::lock_guard lk(mu_);
  if (!busy_) poison_links(fmt::format("rank {} aborted the communicator: {}", rank_, reason));
}

// ---------------------------------------------------------------------------------------------
// Split and statistics

std::shared_ptr<Communicator> CommImpl::split(int color, int key) {
  uint64_t n;
  {
    std::lock_guard lk(mu_);
    n = ++split_count_;
  }
  const std::string prefix = fmt::format("hoop/c{:x}/split{}/", comm_id_, n);
  job_->store->set_string(prefix + std::to_string(rank_), fmt::format("{} {}", color, key));
  struct Member {
    int key, rank;
  };
  std::vector<Member> members;
  for (int r = 0; r < size(); ++r) {
    const std::string v = job_->store->get_string(prefix + std::to_string(r));
    int c = 0, k = 0;
    if (std::sscanf(v.c_str(), "%d %d", &c, &k) != 2) {
      throw_error(ErrorCode::protocol, fmt::format("malformed split record '{}' of rank {}", v, r));
    }
    if (color >= 0 && c == color) members.push_back({k, r});
  }
  if (color < 0) return nullptr;
  std::sort(members.begin(), members.end(),
            [](const Member& a, const Member& b) { return a.key != b.key ? a.key < b.key : a.rank < b.rank; });
  std::vector<PeerInfo> peers;
  int new_rank = -1;
  for (const auto& m : members) {
    if (m.rank == rank_) new_rank = static_cast<int>(peers.size());
    peers.push_back(peers_[static_cast<size_t>(m.rank)]);
  }
  const uint64_t id = fnv1a64(fmt::format("{:x}/{}/{}", comm_id_, n, color)) | 1;
  CommOptions opts;
  opts.timeout = timeout();
  opts.transport = transport_mode_;
  return std::make_shared<Communicator>(
      std::make_unique<CommImpl>(job_, id, new_rank, std::move(peers), opts));
}

CommStats CommImpl::stats() {
  std::unique_lock lk(mu_);
  cv_.wait(lk, [&] { return !busy_ && queue_.empty(); });
  CommStats s;
  s.ops = ops_done_;
  for (size_t p = 0; p < links_.size(); ++p) {
    if (links_[p].empty() || !links_[p][0]) continue;
    LinkStats l;
    l.peer = static_cast<int>(p);
    l.transport = std::string(links_[p][0]->kind());
    l.bytes_sent = counters_[p].sent;
    l.bytes_received = counters_[p].received;
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
  ops_done_ = 0;
}

std::string CommImpl::last_algorithm() {
  std::unique_lock lk(mu_);
  cv_.wait(lk, [&] { return !busy_ && queue_.empty(); });
  return last_algorithm_;
}

}  // namespace hoop::detail
