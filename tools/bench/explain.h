// hoop-bench --explain: the tuner's view of a measured row.
#pragma once

#include "bench_args.h"
#include "hoop/communicator.h"
#include "runner.h"

namespace hoop::bench {

// On rank 0 (local computation, no communication): one comment line with the predicted time
// of every algorithm for this row and the tuner's pick.
void print_explanation(Communicator& comm, const BenchConfig& cfg, const Layout& layout, const RowResult& row);

}  // namespace hoop::bench
