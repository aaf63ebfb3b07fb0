// HOOP_TRACE=path: every rank records its operations and each transfer of their schedules
// (send, receive, reduce, copy, with peer, channel and bytes) and writes them, when its first
// communicator is destroyed or the process exits, as a Chrome/Perfetto trace. Each rank writes
// its own part next to `path`; the last rank of the host to finish merges the parts into `path`.
// Timestamps come from CLOCK_MONOTONIC, shared by the processes of a host, so ranks line up.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "hoop/types.h"
#include "schedule/schedule.h"

namespace hoop::engine {

struct OpIdentity;

// The name a trace gives an action's kind ("send", "recv-reduce", "read", ...).
const char* action_name(schedule::ActionKind k);

class Timeline {
 public:
  // The process's timeline, or null when HOOP_TRACE is not set.
  static Timeline* global();

  // Names this process (its rank in the first communicator created) and the job.
  void set_identity(int rank, int nranks, const std::string& job_id);
  bool owns_identity(uint64_t comm_id) const;
  void claim(uint64_t comm_id);

  void record_op(const OpIdentity& id, const std::string& algorithm, int64_t start_ns, int64_t end_ns);
  void record_action(const OpIdentity& id, size_t step, const schedule::Action& a, size_t bytes,
                     int64_t start_ns, int64_t end_ns);

  // Writes this rank's part; merges all parts when every rank's is there. Once per process.
  void flush();

  static int64_t now_ns();

 private:
  explicit Timeline(std::string path) : path_(std::move(path)) {}
  std::string part_path(int rank) const;
  void merge_if_complete();

  struct Event {
    std::string name;
    const char* cat;
    int64_t start_ns, end_ns;
    int lane;
    std::string args;  // JSON object text
  };

  std::mutex mu_;
  std::string path_;
  std::string job_id_;
  int rank_ = -1;
  int nranks_ = 0;
  uint64_t owner_comm_ = 0;
  bool flushed_ = false;
  std::vector<Event> events_;
};

}  // namespace hoop::engine
