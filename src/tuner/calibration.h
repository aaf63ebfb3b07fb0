// Calibration at communicator creation: rank 0 measures alpha and beta over one shared-memory
// pair and one TCP pair (when the job has them) by ping-pong through the communicator's own
// send/recv, what a message costs the processor where the partner shares rank 0's machine
// (cpu_calibration.h), and gamma by timing the local reduction kernel; the result is cached per host in
// ${XDG_CACHE_HOME:-~/.cache}/hoop/calibration-<host hash>.json so later runs skip the
// measurement. HOOP_CALIBRATE=0 uses the defaults, HOOP_CALIBRATE=force measures again.
// Rank 0 decides and publishes the model in the store: every rank ends with the same model,
// hence the same algorithm choices.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "hoop/communicator.h"
#include "hoop/store.h"
#include "tuner/cost_model.h"

namespace hoop::tuner {

// The partners of rank 0 for each link class (-1: none in this job).
struct CalibrationPartners {
  int shm = -1;
  int tcp = -1;
  bool tcp_same_machine = false;  // the tcp partner shares rank 0's machine (its cores)
  // The tcp partner is on rank 0's host: the link is loopback, which nothing shapes, so a stream
  // slower than a burst there is CPU contention, not a token bucket.
  bool tcp_loopback = false;
  // Every rank is a host of its own on one machine (a lab of network namespaces): where they
  // outnumber its cores, they time two AllReduces together for the tcp hand-over and skew as
  // they pay them (fit_contended_step).
  bool hosts_share_one_machine = false;
};

// Collective over `comm` (every rank calls it, in the same order as other creations on this
// store). `host_id` is rank 0's host id (the cache key); `key_prefix` a store prefix unique to
// the job. Returns the model on every rank.
// How the communicator's waits behave while the calibration times something (agree_on_model's
// `set_wait`, called before and after each timing): spinning long before they sleep (a link's
// timing: a receiver asleep when a message lands would time its own wake-up with the link),
// or holding the core for the spin of ranks that do not outnumber the cores, without yielding
// it (the shared-memory pair of measure_processor, pinned to one core, the same in a job of
// any size; see agree_on_model).
enum class TimingWait { as_configured, spin, hold };

CostModel agree_on_model(Communicator& comm, Store& store, const std::string& key_prefix,
                         const CalibrationPartners& partners, const std::string& host_id,
                         const std::function<void(TimingWait)>& set_wait = {});

// Rank 0's pieces, public for tests and tools.
std::string calibration_cache_path(const std::string& host_id);
// The model in the cache if it covers the classes asked for; else nullopt.
std::optional<CostModel> read_calibration_cache(const std::string& path, bool need_shm, bool need_tcp);
void write_calibration_cache(const std::string& path, const CostModel& m, bool has_shm, bool has_tcp);
// The burst of a shaped link (LinkCost::burst) from a message of `bytes` sent in its turn (the
// direction idle while the other carried the previous one) that took `seconds` including
// `latency`: the part that went at `burst_rate` rather than at `sustained`; at least a packet,
// at most `bytes` (the whole message rode the burst).
double burst_from_turn(size_t bytes, double seconds, double latency, double burst_rate, double sustained);
// gamma, copy and memory_copy from timing the kernels on this core.
void measure_local(CostModel& m);
// CostModel::memory_copy: seconds per byte of a memcpy between buffers beyond the caches; 0 when
// the memory cannot be had.
double measure_memory_copy();
// CostModel::single_copy_read_bytes: the smallest of 16 KiB, 32 KiB, ... 4 MiB from which a
// kernel read (process_vm_readv) costs at most what the slots would, every larger size within a
// quarter more; 16 MiB when none does, 0 when the kernel refuses the read.
size_t measure_single_copy_read();

}  // namespace hoop::tuner
