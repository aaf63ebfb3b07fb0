#include "tuner/calibration.h"

#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/env.h"
#include "core/errors.h"
#include "core/hash.h"
#include "core/log.h"
#include "core/params.h"
#include "kernels/reduce.h"
#include "transport/shm/shm_transport.h"
#include "tuner/cpu_calibration.h"

namespace hoop::tuner {

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kWarmup = 2;
constexpr int kSmallTrips = 16;
constexpr size_t kSmallBytes = 8;
// A burst: what a link takes at once (its rate when a token bucket lets it through faster
// than it sustains). Trips of two of these fit a bucket of 2 ms at 1 Gbit/s.
constexpr int kBurstTrips = 4;
constexpr size_t kBurstBytes = 64 << 10;
constexpr int kLargeTrips = 4;
constexpr size_t kLargeBytes = 1 << 20;
// A stream of large messages from rank 0 to its partner: the partner times all but the first
// (which may ride a burst) as they arrive; at least 4 (the gaps between the others, less the
// shortest and the longest).
constexpr int kStreamMessages = 6;
static_assert(kStreamMessages >= 4);
// Large trips over a shaped link: each direction idles while the other carries a message, as a
// naive root's do, and regains the bucket's burst (the first trip warms the connection up).
constexpr int kTurnTrips = 3;

// The cache's layout and what it measures; a cache of another format is measured again (one
// written before the processor figures or the burst existed would leave them unmeasured).
constexpr int kCacheFormat = 10;  // 9: a copy through memory (memory_copy); 10: the shm pair holds its core

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// The fastest trip: the machine's noise (other processes, a busy core) only ever adds time.
double fastest(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }

// Bytes per second of a one-way transfer of `bytes` that took `t` in all, `alpha` of it latency.
double rate(size_t bytes, double t, double alpha) {
  return static_cast<double>(bytes) / std::max(t - alpha, t * 0.1);
}

// Half round-trip times of `trips` ping-pongs of `bytes` between rank 0 and `partner`; the
// partner echoes and returns an empty vector.
std::vector<double> ping_pong(Communicator& comm, int partner, size_t bytes, int trips, std::vector<uint8_t>& buf) {
  std::vector<double> half;
  for (int i = 0; i < trips; ++i) {
    if (comm.rank() == 0) {
      const auto t0 = Clock::now();
      comm.send(buf.data(), bytes, DataType::u8, partner);
      comm.recv(buf.data(), bytes, DataType::u8, partner);
      half.push_back(seconds(Clock::now() - t0) / 2);
    } else {
      comm.recv(buf.data(), bytes, DataType::u8, 0);
      comm.send(buf.data(), bytes, DataType::u8, 0);
    }
  }
  return half;
}

// The rate of a stream of kStreamMessages large messages from rank 0 to `partner`, as the
// partner sees them arrive after the first: one message over the mean gap between two
// arrivals, the shortest and the longest gap left out, so that one late look at the clock
// (the partner not running when a message landed) moves it neither way. The partner tells
// rank 0.
double stream_rate(Communicator& comm, int partner, std::vector<uint8_t>& buf) {
  double rate = 0;
  if (comm.rank() == 0) {
    for (int i = 0; i < kStreamMessages; ++i) comm.send(buf.data(), kLargeBytes, DataType::u8, partner);
    comm.recv(&rate, 1, DataType::f64, partner);
  } else {
    comm.recv(buf.data(), kLargeBytes, DataType::u8, 0);
    auto last = Clock::now();
    std::vector<double> gaps;
    for (int i = 1; i < kStreamMessages; ++i) {
      comm.recv(buf.data(), kLargeBytes, DataType::u8, 0);
      const auto now = Clock::now();
      gaps.push_back(seconds(now - last));
      last = now;
    }
    std::sort(gaps.begin(), gaps.end());
    double middle = 0;
    for (size_t i = 1; i + 1 < gaps.size(); ++i) middle += gaps[i];
    rate = static_cast<double>(kLargeBytes) * static_cast<double>(gaps.size() - 2) / std::max(middle, 1e-9);
    comm.send(&rate, 1, DataType::f64, 0);
  }
  return rate;
}

enum class PairKind { shared_memory, loopback, network };

// While alive, the communicator's waits behave as `mode` says (agree_on_model's set_wait, if any).
class TimedWaits {
 public:
  TimedWaits(const std::function<void(TimingWait)>& set, TimingWait mode) : set_(set) {
    if (set_) set_(mode);
  }
  ~TimedWaits() {
    if (set_) set_(TimingWait::as_configured);
  }
  TimedWaits(const TimedWaits&) = delete;
  TimedWaits& operator=(const TimedWaits&) = delete;

 private:
  const std::function<void(TimingWait)>& set_;
};

// alpha and beta of the link between rank 0 and `partner` (only rank 0's result means anything).
// Shared memory: beta from the fastest large trip. TCP: beta from the fastest burst trip or the
// stream; over a network, the stream's rate as what the host's link sustains when it is well
// below a burst's (a token bucket takes bursts faster than its rate), and that link's burst
// from the fastest half of a large trip. Over loopback a slow stream means the cores were
// busy: taken for shaping, it would shrink every receive window.
LinkCost measure_pair(Communicator& comm, int partner, const LinkCost& fallback, PairKind kind) {
  const bool tcp = kind != PairKind::shared_memory;
  std::vector<uint8_t> buf(kLargeBytes, 1);
  ping_pong(comm, partner, kSmallBytes, kWarmup, buf);
  const auto small = ping_pong(comm, partner, kSmallBytes, kSmallTrips, buf);
  std::vector<double> burst, large;
  double stream = 0;
  if (tcp) {
    burst = ping_pong(comm, partner, kBurstBytes, kBurstTrips, buf);
    stream = stream_rate(comm, partner, buf);
    if (kind == PairKind::network) large = ping_pong(comm, partner, kLargeBytes, kTurnTrips, buf);
  } else {
    ping_pong(comm, partner, kLargeBytes, 1, buf);
    large = ping_pong(comm, partner, kLargeBytes, kLargeTrips, buf);
  }
  if (comm.rank() != 0) return fallback;
  LinkCost l;
  l.alpha = fastest(small);
  if (tcp) {
    l.beta = std::max(rate(kBurstBytes, fastest(burst), l.alpha), stream);
    constexpr double kBurstier = 0.8;
    if (kind == PairKind::network && stream < kBurstier * l.beta) {
      l.sustained = stream;
      l.burst = burst_from_turn(kLargeBytes, fastest(large), l.alpha, l.beta, l.sustained);
    }
  } else {
    l.beta = rate(kLargeBytes, fastest(large), l.alpha);
  }
  l.endpoint_beta = l.beta;  // one pair cannot tell the endpoint's limit apart
  return l;
}

std::optional<std::string> cache_dir() {
  if (auto x = env::get("XDG_CACHE_HOME")) return *x + "/hoop";
  if (auto h = env::get("HOME")) return *h + "/.cache/hoop";
  return std::nullopt;
}

}  // namespace

void measure_local(CostModel& m) {
  constexpr size_t n = 256 * 1024;  // floats: 1 MiB
  std::vector<float> a(n, 1.0f), b(n, 2.0f), dst(n, 0.0f);
  double best_reduce = 1e30, best_copy = 1e30;
  for (int i = 0; i < 4; ++i) {
    auto t0 = Clock::now();
    kernels::reduce(dst.data(), a.data(), b.data(), n, DataType::f32, RedOp::sum);
    best_reduce = std::min(best_reduce, seconds(Clock::now() - t0));
    t0 = Clock::now();
    std::memcpy(a.data(), dst.data(), n * sizeof(float));
    best_copy = std::min(best_copy, seconds(Clock::now() - t0));
  }
  const double bytes = static_cast<double>(n * sizeof(float));
  m.gamma = best_reduce / bytes;
  m.copy = best_copy / bytes;
  m.memory_copy = measure_memory_copy();
}

double measure_memory_copy() {
  // 128 MiB, beyond the caches of the machines hoop runs on (on a 2-core EPYC VM memcpy ran at
  // 40 GB/s up to 4 MiB, 15 at 64 MiB, 13 from 128 MiB), touched first. In huge pages where the
  // kernel gives them: touching 256 MiB of small pages took that VM about a second, most of it
  // page faults, where the rest of the calibration takes tens of milliseconds.
  constexpr size_t kBytes = 128 << 20;
  void* mapped = ::mmap(nullptr, 2 * kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapped == MAP_FAILED) return 0;
  (void)::madvise(mapped, 2 * kBytes, MADV_HUGEPAGE);
  auto* from = static_cast<std::byte*>(mapped);
  std::byte* to = from + kBytes;
  std::memset(from, 1, kBytes);
  std::memset(to, 0, kBytes);
  double best = 1e30;
  for (int i = 0; i < 3; ++i) {
    const auto t0 = Clock::now();
    std::memcpy(to, from, kBytes);
    best = std::min(best, seconds(Clock::now() - t0));
  }
  ::munmap(mapped, 2 * kBytes);
  return best / static_cast<double>(kBytes);
}

size_t measure_single_copy_read() {
  // A read of this process's own memory takes the kernel's path for a peer's (pinning the pages,
  // copying), without a partner to wait for. The slots it replaces copy twice and hand over
  // through flags, which measured about twice the two copies (AllGather on 2 ranks of an AMD
  // EPYC, 32 KiB a rank: 1.65 us, two memcpy 0.67): a read pays when it costs at most that.
  constexpr double kSlotsOverCopies = 2.0;
  // Around the crossover the ratio of one size moves by a quarter from one calibration to the
  // next (the EPYC: 1.7-2.4 at 256 and 512 KiB, five trials each); the larger sizes are held
  // to a quarter more, so that one slow trial there does not push the crossover past them.
  constexpr double kLargerSizesSlack = 1.25;
  // Doubling, so that 32 KiB, the read the defaults stand for, is a step of its own.
  constexpr size_t kLadder[] = {16 << 10, 32 << 10, 64 << 10, 128 << 10, 256 << 10, 512 << 10, 1 << 20, 2 << 20, 4 << 20};
  constexpr size_t kSizes = std::size(kLadder), kLargest = kLadder[kSizes - 1];
  constexpr int kTrials = 7;
  std::vector<std::byte> from(kLargest, std::byte{1}), to(kLargest, std::byte{2}), slot(kLargest, std::byte{3});
  const pid_t self = ::getpid();
  // The fastest of each, the sizes taking turns: run size after size, a slow spell of a few
  // milliseconds (other work on the machine) covered every trial of one or two sizes and put
  // the crossover at 1 MiB in one calibration where five more gave 256 or 512 KiB; single copy
  // then came from 2 MiB, and AllGather, Broadcast and AllToAll of 1 MiB on 2 and 4 ranks ran
  // 1.2-1.6x slower on the slots.
  double read[kSizes], copies[kSizes];
  std::fill(std::begin(read), std::end(read), 1e30);
  std::fill(std::begin(copies), std::end(copies), 1e30);
  for (int i = 0; i < kTrials; ++i) {
    for (size_t k = 0; k < kSizes; ++k) {
      const size_t bytes = kLadder[k];
      iovec local{to.data(), bytes}, remote{from.data(), bytes};
      auto t0 = Clock::now();
      if (::process_vm_readv(self, &local, 1, &remote, 1, 0) != static_cast<ssize_t>(bytes)) return 0;
      read[k] = std::min(read[k], seconds(Clock::now() - t0));
      t0 = Clock::now();
      std::memcpy(slot.data(), from.data(), bytes);
      std::memcpy(to.data(), slot.data(), bytes);
      copies[k] = std::min(copies[k], seconds(Clock::now() - t0));
    }
  }
  double ratio[kSizes];  // the read's time over the two copies'
  for (size_t k = 0; k < kSizes; ++k) ratio[k] = read[k] / copies[k];
  // The smallest size that pays whose larger sizes all pay within the slack.
  for (size_t k = 0; k < kSizes; ++k) {
    if (ratio[k] > kSlotsOverCopies) continue;
    if (std::all_of(ratio + k + 1, ratio + kSizes, [](double r) { return r <= kSlotsOverCopies * kLargerSizesSlack; }))
      return kLadder[k];
  }
  return 4 * kLargest;  // never at the largest size: from beyond it
}

double burst_from_turn(size_t bytes, double seconds, double latency, double burst_rate, double sustained) {
  // seconds - latency = D / burst_rate + (bytes - D) / sustained (LinkCost::transfer_seconds),
  // for a burst of D bytes.
  const double per_byte_saved = 1 / sustained - 1 / burst_rate;
  if (per_byte_saved <= 0) return 0;
  const double d = (static_cast<double>(bytes) / sustained - (seconds - latency)) / per_byte_saved;
  constexpr double kOnePacket = 1500;  // a bucket passes at least a packet; 0 would mean unmeasured
  return std::clamp(d, kOnePacket, static_cast<double>(bytes));
}

// A model measured by a sanitizer's build gives the sanitizer's speed, not the machine's (its
// memcpy is intercepted: ThreadSanitizer's copies measured 20x slower), so such a build keeps a
// cache of its own; sharing one, a test run under ThreadSanitizer left the release build a model
// that priced shm-direct's copies at 1 GB/s.
#if defined(__SANITIZE_THREAD__)
constexpr const char* kBuildSuffix = "-tsan";
#elif defined(__SANITIZE_ADDRESS__)
constexpr const char* kBuildSuffix = "-asan";
#else
constexpr const char* kBuildSuffix = "";
#endif

std::string calibration_cache_path(const std::string& host_id) {
  const auto dir = cache_dir();
  if (!dir) return "";
  return fmt::format("{}/calibration-{:016x}{}.json", *dir, fnv1a64(host_id), kBuildSuffix);
}

std::optional<CostModel> read_calibration_cache(const std::string& path, bool need_shm, bool need_tcp) {
  if (path.empty()) return std::nullopt;
  std::ifstream in(path);
  if (!in) return std::nullopt;
  try {
    std::stringstream ss;
    ss << in.rdbuf();
    const auto j = nlohmann::json::parse(ss.str());
    if (j.value("format", 1) != kCacheFormat) return std::nullopt;
    const bool has_shm = j.value("measured_shm", false), has_tcp = j.value("measured_tcp", false);
    if ((need_shm && !has_shm) || (need_tcp && !has_tcp)) return std::nullopt;
    CostModel m = model_from_json(j.at("model").dump());
    m.source = "cache " + path;
    return m;
  } catch (const std::exception& e) {
    HOOP_WARN("ignoring the calibration cache {}: {}", path, e.what());
    return std::nullopt;
  }
}

void write_calibration_cache(const std::string& path, const CostModel& m, bool has_shm, bool has_tcp) {
  if (path.empty()) return;
  try {
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    nlohmann::json j;
    j["format"] = kCacheFormat;
    j["model"] = nlohmann::json::parse(to_json(m));
    j["measured_shm"] = has_shm;
    j["measured_tcp"] = has_tcp;
    // Other jobs may read it at the same time: write aside, then rename.
    const std::string tmp = fmt::format("{}.{}.tmp", path, ::getpid());
    {
      std::ofstream out(tmp);
      out << j.dump(2) << "\n";
      if (!out) throw std::runtime_error("write failed");
    }
    std::filesystem::rename(tmp, path);
  } catch (const std::exception& e) {
    HOOP_WARN("cannot write the calibration cache {}: {}", path, e.what());
  }
}

CostModel agree_on_model(Communicator& comm, Store& store, const std::string& key_prefix,
                         const CalibrationPartners& partners, const std::string& host_id,
                         const std::function<void(TimingWait)>& set_wait) {
  const std::string plan_key = key_prefix + "plan", model_key = key_prefix + "model";
  std::string plan;
  CostModel model;
  const auto start = Clock::now();
  if (comm.rank() == 0) {
    const std::string mode = *params::text(params::Id::calibrate);  // 0, 1 or force
    const std::string path = calibration_cache_path(host_id);
    // Rank 0's own class needs are what it can measure: a class without a partner is left at
    // its default.
    std::optional<CostModel> cached;
    if (mode != "0" && mode != "force") cached = read_calibration_cache(path, partners.shm >= 0, partners.tcp >= 0);
    if (mode == "0") {
      plan = "defaults";
    } else if (cached) {
      plan = "cached";
      model = *cached;
    } else {
      plan = "measure";
    }
    store.set_string(plan_key, plan);
  } else {
    plan = store.get_string(plan_key);
  }
  if (plan == "measure") {
    const bool shm_role = comm.rank() == 0 || comm.rank() == partners.shm;
    const bool tcp_role = comm.rank() == 0 || comm.rank() == partners.tcp;
    // A TCP link is timed with both ends spinning: a receiver asleep when a message lands adds
    // its own wake-up, which over the lab's 1 Gbit/s links (8 ranks on 2 idle virtual cores,
    // halted between messages) measured 12-40 us from run to run against 4.3-5.0 spinning; the
    // model priced small calls there up to 2x above what they took (hoop-sim against the lab).
    // What waiting costs ranks that share cores is the hand-over's, measured apart
    // (measure_processor). Shared memory keeps the timing of its runs, sleeping where they
    // sleep: on 8 ranks of 2 cores, 19-21 us against 0.55 spinning, and the choices between
    // shm-direct and the links on one host were measured with it.
    if (partners.shm >= 0 && shm_role) {
      model.shm = measure_pair(comm, partners.shm, model.shm, PairKind::shared_memory);
      // The pinned pair keeps the core while it spins, as 2 ranks on 2 cores do, in a job of
      // any size: its waits had yielded in jobs of more ranks than cores and not in others, and
      // the one cache of a host held 0.30 us a message and a 5.2 us hand-over or 1.8 and 20
      // after whichever job calibrated it. Measured side by side (bench/compare/ab, one build,
      // the two caches), the latter priced 4- and 8-rank jobs' choices better: AllReduce on 8
      // ranks 1.7-2.0x faster at 1-16 KiB (shm-direct, not the leaders), on 4 ranks 1.4x at 16
      // KiB, no cell of 144 slower than 0.95.
      const TimedWaits holding(set_wait, TimingWait::hold);
      measure_processor(comm, partners.shm, model.shm);  // a host is on one machine
    }
    if (partners.tcp >= 0 && tcp_role) {
      {
        const TimedWaits spinning(set_wait, TimingWait::spin);
        model.tcp = measure_pair(comm, partners.tcp, model.tcp,
                                 partners.tcp_loopback ? PairKind::loopback : PairKind::network);
      }
      if (partners.tcp_same_machine) measure_processor(comm, partners.tcp, model.tcp);
    }
    if (partners.hosts_share_one_machine && comm.size() > machine_cores()) {
      const auto [ring, rd] = allreduce_call_seconds(comm, {"ring", "recursive-doubling"});
      if (comm.rank() == 0) {
        HOOP_INFO("tuner: {} ranks on {} cores, an AllReduce of {} B a rank: ring {:.1f} us, recursive doubling {:.1f} us",
                  comm.size(), machine_cores(), contended_fit_count(comm.size()) * sizeof(float), ring * 1e6, rd * 1e6);
        CostModel fitted = model;
        fitted.cores = machine_cores();
        if (fit_contended_step(ring, rd, comm.size(), fitted)) model.tcp = fitted.tcp;
      }
    }
    if (comm.rank() == 0) {
      // A class that could not be measured keeps its default, but an old measurement of it
      // from the cache is better than the default.
      const std::string path = calibration_cache_path(host_id);
      const auto old_shm = read_calibration_cache(path, true, false);
      const auto old_tcp = read_calibration_cache(path, false, true);
      if (partners.shm < 0 && old_shm) model.shm = old_shm->shm;
      if (partners.tcp < 0 && old_tcp) model.tcp = old_tcp->tcp;
      measure_local(model);
      model.single_copy_read_bytes = measure_single_copy_read();
      model.cores = machine_cores();
      model.source = "measured";
      write_calibration_cache(path, model, partners.shm >= 0 || old_shm.has_value(),
                              partners.tcp >= 0 || old_tcp.has_value());
    }
  }
  if (comm.rank() == 0) {
    // The engine's knob, not a measurement: the rings of this job, whatever the cache says.
    model.shm_ring_bytes = transport::ring_bytes_for_host(comm.local_size());
    model.shm_ring_full_bytes = transport::full_ring_bytes();
    store.set_string(model_key, to_json(model));
  }
  // Everyone, rank 0 included, uses the model as parsed from the same text.
  CostModel agreed = model_from_json(store.get_string(model_key));
  if (comm.rank() == 0) {
    HOOP_INFO("tuner: cost model {} in {:.1f} ms\n{}", plan, seconds(Clock::now() - start) * 1e3, to_table(agreed));
  }
  return agreed;
}

}  // namespace hoop::tuner
