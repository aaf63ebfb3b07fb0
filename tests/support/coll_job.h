// Shared pieces of the end-to-end tests of the rest of the collective set: a job of N ranks
// over one transport running a list of cases, and checks of outputs laid out in blocks
// (sentinel bytes outside every block and past the end must survive).
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "hoop/communicator.h"
#include "schedule/schedule.h"
#include "support/spawn.h"

namespace hoop::test {

struct JobParam {
  int nranks;
  const char* transport;  // "auto" with fake hosts
  // Fake hosts (HOOP_HOST_ID per rank: ranks of one talk over shared memory, of two over
  // TCP); empty: one host.
  std::vector<int> hosts = {};
};

std::string job_param_name(const ::testing::TestParamInfo<JobParam>& info);

// N = 1, 2, 3, 5, 8 over shared memory and TCP.
std::vector<JobParam> job_params();

// Runs body on every rank of a job (the transport forced through HOOP_TRANSPORT) and expects
// every rank to exit cleanly; removes the job's shared-memory segments afterwards.
void run_job(const JobParam& p, const std::function<void(RankContext&, Communicator&)>& body,
             const std::vector<std::pair<std::string, std::string>>& env = {});

// One call of a test: the collective, the algorithm forced (empty: the library's choice), and
// its shape. The suites of AllReduce, ReduceScatter, AllGather, Broadcast and Reduce run theirs
// through support/collective_cases.h.
struct CollCase {
  int id = 0;  // its index in the job's list (the parent and the ranks build the same list)
  OpType op = OpType::alltoall;
  std::string algo;
  DataType dt = DataType::i32;
  RedOp redop = RedOp::sum;
  size_t count = 0;     // elements per block, or for the v-forms the count pattern (support/vcounts.h);
                        // reducescatter: recvcount; allgather: sendcount
  int root = 0;
  bool spread = false;  // v-forms: blocks in reverse rank order with gaps (else packed, no displacements)
  bool in_place = false;
  bool special = false;  // f32/f64 inputs with NaN payloads and signed zeros: only the bits
                         // across ranks are compared
  std::string describe() const;
  // For the five collectives that take one count: elements every rank contributes
  // (reducescatter: its whole send buffer) and receives.
  size_t input_elems(int n) const { return op == OpType::reducescatter ? count * n : count; }
  size_t output_elems(int n) const { return op == OpType::allgather ? count * n : count; }
  // Every rank ends with the same output.
  bool replicated() const {
    return op == OpType::allreduce || op == OpType::allgather || op == OpType::broadcast;
  }
};

// Runs every case in order on every rank of a job: run(comm, case, seed) calls and checks it;
// then the algorithm that ran must be the one forced.
void run_cases(const JobParam& p, const std::vector<CollCase>& cases,
               const std::function<void(Communicator&, const CollCase&, uint64_t seed)>& run);

// Bytes after every output that nobody may write.
inline constexpr size_t kGuardBytes = 64;

// A buffer of `bytes` plus the guard, all sentinel.
std::vector<unsigned char> sentinel_buffer(size_t bytes);

// "" when every byte of buf[0, size) outside the blocks (elements of es bytes) is still the
// sentinel, else where it is not.
std::string untouched_outside(const unsigned char* buf, size_t size, const schedule::Blocks& blocks, size_t es);

}  // namespace hoop::test
