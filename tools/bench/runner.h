// Runs one collective at one size, out of place and in place: verification, warm-up, timed
// iterations, and the combination of the ranks' times.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bench_args.h"
#include "bench_math.h"
#include "buffer.h"
#include "data_plan.h"
#include "hoop/communicator.h"
#include "verify.h"

namespace hoop::bench {

struct Measurement {
  TimeStats time;  // over iterations, of the ranks' combined time (us)
  double algbw_gbps = 0;
  double busbw_gbps = 0;
  std::optional<uint64_t> wrong;  // mismatching elements summed over ranks; nullopt: -c 0
  std::string algo_used;  // what the library ran (it may choose per size when asked for auto)
};

struct RowResult {
  Layout layout;
  Measurement out_of_place;
  std::optional<Measurement> in_place;  // nullopt: the collective has no in-place form
};

class CollectiveRunner {
 public:
  // Allocates and touches the buffers for the largest of `layouts`.
  CollectiveRunner(Communicator& comm, const BenchConfig& cfg, const std::vector<Layout>& layouts);

  // One row; `algo` is passed as OpOptions::algo ("" lets the library choose).
  RowResult run(const Layout& layout, const std::string& algo);

 private:
  // One call's arguments on this rank.
  struct Call {
    const Layout& layout;
    const VectorArgs& v;
    void* send;  // only read by the collective
    void* recv;
  };

  Call call_for(const Layout& layout, const VectorArgs& v, bool in_place);
  Measurement measure(const Call& c, const OpOptions& opts);
  uint64_t run_and_verify(const Call& c, const OpOptions& opts);
  // Per-iteration times of this rank in microseconds (one value, the mean, when async).
  std::vector<double> time_iterations(const Call& c, const OpOptions& opts, int iterations);
  TimeStats combine_over_ranks(std::vector<double> times);

  // The collective, blocking (returning an empty handle) or asynchronous.
  Work issue(const Call& c, const OpOptions& opts, bool async);

  Communicator& comm_;
  const BenchConfig& cfg_;
  Verifier verifier_;
  TouchedBuffer send_buf_;
  TouchedBuffer recv_buf_;
};

}  // namespace hoop::bench
