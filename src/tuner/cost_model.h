// The tuner's cost model: what one message and one byte cost on each class of link, and what
// a reduced or copied byte costs on a core. Measured at start-up (calibration.h), loaded from a
// file, or the defaults below; printable as a table.
#pragma once

#include <cstddef>
#include <string>

namespace hoop::tuner {

enum class LinkClass { shm, tcp };
const char* to_string(LinkClass c);

struct LinkCost {
  double alpha = 0;          // seconds per message (latency, start-up of a transfer)
  double beta = 0;           // bytes per second of one connection (one peer, one channel)
  double endpoint_beta = 0;  // bytes per second of one endpoint in one direction, shared by its
                             // connections: a rank's copy rate for shm, a host's NIC for tcp
  // What a message costs the processor, at each of its two ends (the sender's and the
  // receiver's system calls, the kernel's path between them, the engine's handling), measured
  // with both ends on one core; 0: not measured (a rank's further message in a step then costs
  // overhead_fraction * alpha, and ranks sharing cores are not priced).
  double cpu = 0;       // seconds per message and end
  double cpu_byte = 0;  // seconds per byte and end
  // A hand-over between two ranks on one core beyond their messages' processor time (one rank
  // goes to sleep or yields, the other is woken): what a step waiting for a peer that must run
  // first adds, per rank of a core, while the ranks of a machine outnumber its cores. 0: not
  // measured.
  double handoff = 0;
  // What a call loses on a machine whose ranks outnumber its cores because they start it out
  // of step: each call's time is its slowest rank's, and that rank began while others were
  // still ending the call before (hoop-bench's time of a call). Added once to a call of ranks of
  // such a machine. 0: not measured.
  double skew = 0;
  // Bytes per second a host's link sustains over a whole operation in each direction, when it
  // takes a burst faster than that (a token bucket): 0, the same as endpoint_beta.
  double sustained = 0;
  // Bytes such a link passes at its burst rate after a pause (a token bucket's depth): what a
  // direction regains while the schedule keeps it idle. 0: not measured (the two directions
  // are then taken to overlap across steps as well as within one).
  double burst = 0;
  double sustained_rate() const { return sustained > 0 ? sustained : endpoint_beta; }
  // One transfer of `bytes` on its own: at beta, but over a shaped link with a measured burst
  // only the burst goes that fast and the rest at the sustained rate (burst_from_turn in
  // calibration.h solves this for the burst).
  double transfer_seconds(double bytes) const {
    if (sustained <= 0 || burst <= 0 || bytes <= burst) return bytes / beta;
    return burst / beta + (bytes - burst) / sustained;
  }
};

struct CostModel {
  LinkCost shm{2e-6, 6e9, 6e9};
  LinkCost tcp{25e-6, 1.2e9, 1.2e9};
  double gamma = 1.0 / 10e9;     // seconds per byte reduced (dst bytes of a receive-and-reduce)
  double copy = 1.0 / 12e9;      // seconds per byte of a local copy
  // Seconds per byte of a copy between buffers larger than the caches (measure_local, one core);
  // 0: not measured. What a stream's message costs the processor at each end
  // (predict.cc's Conn::streamed).
  double memory_copy = 0;
  double overhead_fraction = 0.5;  // each further message of a rank in one step costs this * alpha
                                   // of CPU time that does not overlap with the others (when the
                                   // link's cpu is not measured)
  // Processors the ranks of one machine share (the calibrating machine's); 0: not known. When a
  // machine's ranks outnumber them, a step costs at least the processor time of all the
  // machine's ranks in that step over this many cores.
  int cores = 0;
  size_t slice_bytes = 256 * 1024;  // the engine's pipelining slice (forwarding lag per hop)
  size_t shm_ring_bytes = 4 * 1024 * 1024;  // a shared-memory link's ring (HOOP_SHM_RING_BYTES's default)
  // The ring before it shrinks on a host of many ranks (transport::ring_bytes_for_host):
  // HOOP_SHM_RING_BYTES's value, 4 MiB unset. The rings shrink so that every pair of the host's
  // ranks fits, for AllToAllv, whose only algorithm links every pair; where the others have one
  // that does not, the tuner takes it where every pair would not fit at this size (pricing.cc).
  size_t shm_ring_full_bytes = 4 * 1024 * 1024;
  // The smallest read of a peer's memory by a kernel call (process_vm_readv) that the
  // calibration found no slower than two copies through a slot, from a ladder of sizes
  // (measure_single_copy_read); 0: not measured. shm-direct's single-copy thresholds follow it
  // where HOOP_DIRECT_* leave them unset (region_shape.h): the kernel call's cost differs
  // between machines by more than the slots' does.
  size_t single_copy_read_bytes = 0;
  std::string source = "defaults";  // "defaults", "measured", "cache <path>", "file <path>"

  const LinkCost& link(LinkClass c) const { return c == LinkClass::shm ? shm : tcp; }
  LinkCost& link(LinkClass c) { return c == LinkClass::shm ? shm : tcp; }
};

// JSON text (nlohmann-json), exact for doubles, so every rank parses the same model.
std::string to_json(const CostModel& m);
// Also takes a calibration cache file's text (the model under "model"). Throws
// hoop::Error{invalid_argument} on malformed text, missing/non-positive fields or an object
// with none of the model's keys.
CostModel model_from_json(const std::string& text);
CostModel load_model_file(const std::string& path);

// The send and receive buffers for the TCP links of a model whose link is shaped (sustained >
// 0): 2 ms at the sustained rate, at least 64 KiB; 0 when the link is not shaped (the
// configured buffer stays). A shaper's queue fills up to the window of each connection, and
// the acknowledgements of the other direction wait behind it: in the lab (tbf, 20 ms of queue),
// a ring kept 96-99% of the rate with 2 ms of window (64 KiB at 200 Mbit/s, 256 KiB at
// 1 Gbit/s), 83-86% with the default 4 MiB or the kernel's autotuning at 200 Mbit/s, 90% with
// 128 KiB, and took retransmissions at 1 Gbit/s with 64 KiB. A send buffer of 4 MiB over such a
// link let a chain's sender run ahead while the link idled a quarter of the time (2 hosts x 4
// ranks, Broadcast of 4 MiB at 1 Gbit/s: 48 ms a call where the link needs 35).
size_t shaped_link_window(const CostModel& m);

// A printable alpha/beta/gamma table.
std::string to_table(const CostModel& m);

}  // namespace hoop::tuner
