#include "engine/timeline.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/log.h"
#include "core/params.h"
#include "engine/engine.h"

namespace hoop::engine {

const char* action_name(schedule::ActionKind k) {
  switch (k) {
    case schedule::ActionKind::send: return "send";
    case schedule::ActionKind::recv_copy: return "recv";
    case schedule::ActionKind::recv_reduce: return "recv-reduce";
    case schedule::ActionKind::copy: return "copy";
    case schedule::ActionKind::finish_avg: return "finish-avg";
    case schedule::ActionKind::publish: return "publish";
    case schedule::ActionKind::wait_flag: return "wait";
    case schedule::ActionKind::read: return "read";
    case schedule::ActionKind::read_reduce: return "read-reduce";
    case schedule::ActionKind::write: return "write";
  }
  return "?";
}

namespace {

// Lane 0 holds the operations; then one lane per (peer, direction), and one for local work.
int lane_of(const schedule::Action& a) {
  switch (a.kind) {
    case schedule::ActionKind::send:
    case schedule::ActionKind::write: return 2 + 2 * a.peer;
    case schedule::ActionKind::recv_copy:
    case schedule::ActionKind::recv_reduce: return 3 + 2 * a.peer;
    default: return 1;
  }
}

std::string lane_name(int lane) {
  if (lane == 0) return "operations";
  if (lane == 1) return "local";
  const int peer = (lane - 2) / 2;
  return (lane % 2 == 0 ? "send to " : "recv from ") + std::to_string(peer);
}

}  // namespace

Timeline* Timeline::global() {
  static Timeline* instance = [] () -> Timeline* {
    const std::string path = params::text_or(params::Id::trace, "");
    if (path.empty()) return nullptr;
    auto* t = new Timeline(path);  // lives until exit, flushed by the world communicator or atexit
    std::atexit([] { Timeline::global()->flush(); });
    return t;
  }();
  return instance;
}

int64_t Timeline::now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void Timeline::set_identity(int rank, int nranks, const std::string& job_id) {
  std::lock_guard lk(mu_);
  if (rank_ >= 0) return;
  rank_ = rank;
  nranks_ = nranks;
  job_id_ = job_id;
}

bool Timeline::owns_identity(uint64_t comm_id) const { return owner_comm_ == comm_id; }

void Timeline::claim(uint64_t comm_id) {
  std::lock_guard lk(mu_);
  if (owner_comm_ == 0) owner_comm_ = comm_id;
}

void Timeline::record_op(const OpIdentity& id, const std::string& algorithm, int64_t start_ns,
                         int64_t end_ns) {
  nlohmann::json args = {{"comm", fmt::format("{:#x}", id.comm_id)}, {"seq", id.seq},
                         {"algorithm", algorithm}, {"count", id.count},
                         {"dtype", std::string(to_string(id.dtype))}, {"phase", id.phase}};
  if (id.root >= 0) args["root"] = id.root;
  std::lock_guard lk(mu_);
  events_.push_back({fmt::format("{} #{}", to_string(id.op), id.seq), "op", start_ns, end_ns, 0, args.dump()});
}

void Timeline::record_action(const OpIdentity& id, size_t step, const schedule::Action& a, size_t bytes,
                             int64_t start_ns, int64_t end_ns) {
  nlohmann::json args = {{"op", std::string(to_string(id.op))}, {"seq", id.seq}, {"phase", id.phase},
                         {"step", step}, {"bytes", bytes}};
  if (a.peer >= 0) {
    args["peer"] = a.peer;
    args["channel"] = a.channel;
  }
  std::lock_guard lk(mu_);
  events_.push_back({action_name(a.kind), "step", start_ns, end_ns, lane_of(a), args.dump()});
}

std::string Timeline::part_path(int rank) const {
  return fmt::format("{}.{}.rank{}.part", path_, job_id_, rank);
}

void Timeline::flush() {
  std::lock_guard lk(mu_);
  if (flushed_ || rank_ < 0) return;
  flushed_ = true;
  std::set<int> lanes;
  std::ostringstream out;
  out << "[";
  bool first = true;
  auto emit = [&](const std::string& text) {
    out << (first ? "\n" : ",\n") << text;
    first = false;
  };
  emit(fmt::format(R"({{"name":"process_name","ph":"M","pid":{},"args":{{"name":"rank {}"}}}})", rank_, rank_));
  emit(fmt::format(R"({{"name":"process_sort_index","ph":"M","pid":{},"args":{{"sort_index":{}}}}})", rank_, rank_));
  for (const Event& e : events_) {
    lanes.insert(e.lane);
    emit(fmt::format(R"({{"name":"{}","cat":"{}","ph":"X","ts":{:.3f},"dur":{:.3f},"pid":{},"tid":{},"args":{}}})",
                     e.name, e.cat, static_cast<double>(e.start_ns) / 1e3,
                     static_cast<double>(e.end_ns - e.start_ns) / 1e3, rank_, e.lane, e.args));
  }
  for (int lane : lanes) {
    emit(fmt::format(R"({{"name":"thread_name","ph":"M","pid":{},"tid":{},"args":{{"name":"{}"}}}})", rank_, lane,
                     lane_name(lane)));
  }
  out << "\n]\n";
  const std::string part = part_path(rank_);
  const std::string tmp = part + ".tmp";
  {
    std::ofstream f(tmp);
    f << out.str();
    if (!f) {
      HOOP_WARN("HOOP_TRACE: cannot write {}", tmp);
      return;
    }
  }
  std::rename(tmp.c_str(), part.c_str());
  merge_if_complete();
}

// Every rank checks after writing its part; the one that sees all parts and wins the lock merges.
void Timeline::merge_if_complete() {
  for (int r = 0; r < nranks_; ++r) {
    if (!std::filesystem::exists(part_path(r))) return;
  }
  const std::string lock = fmt::format("{}.{}.lock", path_, job_id_);
  const int fd = ::open(lock.c_str(), O_CREAT | O_EXCL | O_WRONLY, 0644);
  if (fd < 0) return;
  ::close(fd);
  // Another rank may have merged (and removed the parts and its lock) in between.
  for (int r = 0; r < nranks_; ++r) {
    if (!std::filesystem::exists(part_path(r))) {
      std::remove(lock.c_str());
      return;
    }
  }
  nlohmann::json merged = nlohmann::json::array();
  for (int r = 0; r < nranks_; ++r) {
    std::ifstream f(part_path(r));
    nlohmann::json part = nlohmann::json::parse(f, nullptr, false);
    if (part.is_discarded() || !part.is_array()) {
      HOOP_WARN("HOOP_TRACE: part {} is not valid JSON; skipped", part_path(r));
      continue;
    }
    for (auto& e : part) merged.push_back(std::move(e));
  }
  const std::string tmp = path_ + ".tmp";
  {
    std::ofstream f(tmp);
    f << nlohmann::json{{"traceEvents", merged}, {"displayTimeUnit", "ns"}}.dump() << "\n";
  }
  std::rename(tmp.c_str(), path_.c_str());
  for (int r = 0; r < nranks_; ++r) std::remove(part_path(r).c_str());
  std::remove(lock.c_str());
  HOOP_INFO("HOOP_TRACE: wrote {} ({} events from {} ranks)", path_, merged.size(), nranks_);
}

}  // namespace hoop::engine
