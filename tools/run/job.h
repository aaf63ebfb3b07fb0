// A job: the rendezvous store, N ranks, their output, and the decisions taken while they run
// (a failed rank stops the others; a signal is forwarded; --timeout stops everything).
#pragma once

#include "options.h"

namespace hoop::run {

// Runs the job to its end and returns hoop-run's exit code: 0 when every rank exited 0; the
// first failed rank's code (128+signal when killed); 128+signal when hoop-run was signalled;
// 124 on timeout; 127 when the program is not found, 126 when it cannot be executed.
// Whatever happens, the job's shared-memory segments are removed before it returns.
int run_job(const RunOptions& opts);

}  // namespace hoop::run
