// Registered buffers (Communicator::alloc, register_buffer) on 1..8 real processes of one host:
// every collective shm-direct runs, over buffers in registered memory, every dtype and op, in
// and out of place, odd counts: exact against the reference and bit-identical across ranks, as
// on unregistered memory. AllReduce and Reduce go zero copy (writing into the peers' outputs)
// only when every rank's buffers are registered: a rank whose are not makes all of them take
// the other path alike. A freed buffer in a call is a clear error; memory the caller maps itself
// (as torch's share_memory_() does) registers; a killed rank leaves nothing in /dev/shm.
#include <gtest/gtest.h>
#include <signal.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "hoop/communicator.h"
#include "hoop/error.h"
#include "hoop/types.h"
#include "support/collective_cases.h"
#include "support/spawn.h"

namespace hoop::test {
namespace {

using namespace std::chrono_literals;

constexpr const char* kAlgo = "shm-direct";

OpOptions forced_direct() {
  OpOptions o;
  o.algo = kAlgo;
  return o;
}

// Small tunables: cells up to 1 KiB, 8 KiB slots, single copy from 16 KiB, and zero copy for
// AllReduce and Reduce from 4 KiB, so that a few thousand elements already cross every path.
SpawnOptions small_tunables() {
  SpawnOptions o;
  o.timeout = 180s;
  o.env = {{"HOOP_DIRECT_SMALL_BYTES", "1K"},          {"HOOP_DIRECT_CELL_BYTES", "4K"},
           {"HOOP_DIRECT_CHUNK_BYTES", "8K"},          {"HOOP_DIRECT_SINGLE_COPY_BYTES", "16K"},
           {"HOOP_DIRECT_SINGLE_COPY_PART_BYTES", "1K"}, {"HOOP_DIRECT_REGISTERED_BYTES", "4K"}};
  return o;
}

struct Combo {
  OpType op;
  DataType dt;
  RedOp redop;
};

// Every dtype and op through AllReduce (the zero-copy path), the other collectives on a few.
std::vector<Combo> combos() {
  std::vector<Combo> out;
  for (DataType dt : {DataType::f32, DataType::f64, DataType::f16, DataType::bf16, DataType::i8, DataType::u8,
                      DataType::i32, DataType::u32, DataType::i64, DataType::u64}) {
    for (RedOp op : {RedOp::sum, RedOp::prod, RedOp::min, RedOp::max, RedOp::avg}) out.push_back({OpType::allreduce, dt, op});
  }
  for (const Combo& c : {Combo{OpType::reduce, DataType::f32, RedOp::sum}, Combo{OpType::reduce, DataType::i64, RedOp::avg},
                         Combo{OpType::reduce, DataType::bf16, RedOp::max}, Combo{OpType::reducescatter, DataType::f32, RedOp::sum},
                         Combo{OpType::reducescatter, DataType::u32, RedOp::prod}, Combo{OpType::allgather, DataType::f64, RedOp::sum},
                         Combo{OpType::allgather, DataType::u8, RedOp::sum}, Combo{OpType::broadcast, DataType::f32, RedOp::sum},
                         Combo{OpType::broadcast, DataType::i8, RedOp::sum}}) {
    out.push_back(c);
  }
  return out;
}

std::vector<CollCase> make_cases(int n, const std::vector<size_t>& counts) {
  std::vector<CollCase> cases;
  for (size_t count : counts) {
    for (const Combo& combo : combos()) {
      for (bool in_place : {false, true}) {
        const int root = static_cast<int>(cases.size() / 2) % n;
        add_case(cases, combo.op, combo.dt, combo.redop, root, count, in_place, kAlgo);
      }
    }
  }
  return cases;
}

// Every case on n ranks with buffers from Communicator::alloc (or private ones), each result
// checked exactly.
void run_cases(int n, const std::vector<size_t>& counts, bool registered, const SpawnOptions& opts) {
  RunnerOptions ropts;
  ropts.algo_check = AlgoCheck::exact;
  ropts.registered = registered;
  ropts.full_check_limit = 1 << 16;
  run_cases_and_check(n, make_cases(n, counts), ropts, opts);
}

class RegisteredRanks : public ::testing::TestWithParam<int> {};

// Counts: empty, one, below the cells' limit, over the zero-copy threshold (primes, not
// divisible by N), and one whose parts span several of zero copy's 256 KiB pieces.
TEST_P(RegisteredRanks, EveryCollectiveMatchesTheReferenceOverRegisteredBuffers) {
  const int n = GetParam();
  std::vector<size_t> counts = {0, 1, 67, 2053, 9973};
  if (n <= 3) counts.push_back(300007);
  run_cases(n, counts, true, small_tunables());
}

std::string ranks_name(const ::testing::TestParamInfo<int>& p) { return std::to_string(p.param) + "ranks"; }

INSTANTIATE_TEST_SUITE_P(Registered, RegisteredRanks, ::testing::Values(1, 2, 3, 5, 8), ranks_name);

// The same with outputs from 8 KiB stored around the caches (HOOP_DIRECT_STREAM_BYTES; by
// default only from 16 MiB, past every count of this suite): zero copy's results and single
// copy's reads go through the streaming stores; over registered buffers, and over private ones.
TEST(Registered, OutputsWrittenAroundTheCachesMatchTheReference) {
  SpawnOptions options = small_tunables();
  options.env.emplace_back("HOOP_DIRECT_STREAM_BYTES", "8K");
  for (bool registered : {true, false}) {
    SCOPED_TRACE(registered ? "registered" : "private");
    run_cases(3, {67, 2053, 9973, 300007}, registered, options);
  }
}

// What an AllReduce writes into its peers' outputs is counted as sent to them: zero copy shows
// there. Registered on every rank, each rank writes its part to every peer; with one rank's
// buffers not registered, every rank takes the other path (nothing written to a peer) and the
// sums stay exact.
TEST(Registered, ZeroCopyOnlyWhenEveryRankIsRegistered) {
  constexpr int kRanks = 3;
  constexpr size_t kCount = 9973;
  for (int unregistered : {-1, 0, 2}) {
    auto results = run_ranks(kRanks, [&](RankContext& ctx) {
      auto comm = ctx.make_comm();
      ctx.report("JOB " + comm->job_id());
      SharedBuffer shared = comm->alloc(kCount * sizeof(int64_t));
      std::vector<int64_t> plain(kCount);
      int64_t* v = ctx.rank == unregistered ? plain.data() : shared.as<int64_t>();
      for (size_t i = 0; i < kCount; ++i) v[i] = static_cast<int64_t>(i) * (ctx.rank + 1);
      comm->reset_stats();
      comm->allreduce(v, v, kCount, DataType::i64, RedOp::sum, forced_direct());
      for (size_t i = 0; i < kCount; ++i) {
        ASSERT_EQ(v[i], static_cast<int64_t>(i) * 6) << "rank " << ctx.rank << " element " << i;
      }
      const uint64_t sent = comm->stats().bytes_sent;
      if (unregistered < 0) {
        EXPECT_GT(sent, kCount * sizeof(int64_t) / 2) << "rank " << ctx.rank << ": no zero copy";
      } else {
        EXPECT_EQ(sent, 0u) << "rank " << ctx.rank << " wrote into a peer with rank " << unregistered
                            << " unregistered";
      }
    }, small_tunables());
    EXPECT_TRUE(all_ok(results)) << "unregistered rank " << unregistered;
    expect_no_job_segments(results);
  }
}

// AllToAll over registered buffers (the peers' blocks read in place), in place on some ranks.
TEST(Registered, AllToAllOverRegisteredBuffers) {
  constexpr int kRanks = 4;
  SpawnOptions o = small_tunables();
  o.env.emplace_back("HOOP_DIRECT_SINGLE_COPY_ALLTOALL_BYTES", "1K");
  auto results = run_ranks(kRanks, [&](RankContext& ctx) {
    auto comm = ctx.make_comm();
    ctx.report("JOB " + comm->job_id());
    for (size_t count : {size_t{1}, size_t{1000}, size_t{4099}}) {
      for (int in_place_rank : {-1, 2}) {
        const bool in_place = ctx.rank == in_place_rank;
        SharedBuffer in = comm->alloc(count * kRanks * sizeof(int32_t));
        SharedBuffer out = comm->alloc(count * kRanks * sizeof(int32_t));
        for (size_t i = 0; i < count * kRanks; ++i) in.as<int32_t>()[i] = ctx.rank * 1000000 + static_cast<int32_t>(i);
        int32_t* got = in_place ? in.as<int32_t>() : out.as<int32_t>();
        comm->alltoall(in.data(), got, count, DataType::i32, forced_direct());
        for (size_t p = 0; p < static_cast<size_t>(kRanks); ++p) {
          for (size_t j = 0; j < count; ++j) {
            const auto want = static_cast<int32_t>(p * 1000000 + static_cast<size_t>(ctx.rank) * count + j);
            ASSERT_EQ(got[p * count + j], want) << "rank " << ctx.rank << " count " << count << " block " << p;
          }
        }
      }
    }
  }, o);
  EXPECT_TRUE(all_ok(results));
  expect_no_job_segments(results);
}

// A SharedBuffer freed before a call that names it: the call fails at once with
// invalid_argument saying so, on the rank that made the mistake, before touching the memory.
TEST(Registered, AFreedBufferInACallIsAClearError) {
  auto results = run_ranks(2, [&](RankContext& ctx) {
    auto comm = ctx.make_comm();
    SharedBuffer b = comm->alloc(4096);
    float* stale = b.as<float>();
    b.free();
    try {
      comm->allreduce(stale, stale, 1024, DataType::f32, RedOp::sum);
      ADD_FAILURE() << "rank " << ctx.rank << ": an allreduce on a freed buffer succeeded";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << e.what();
      EXPECT_NE(std::string(e.what()).find("freed"), std::string::npos) << e.what();
    }
    // The communicator is still usable.
    float x = 1.0f;
    comm->allreduce(&x, &x, 1, DataType::f32, RedOp::sum);
    EXPECT_EQ(x, 2.0f);
  });
  EXPECT_TRUE(all_ok(results));
}

// Memory the process allocates after freeing a SharedBuffer is ordinary memory, whatever
// addresses the allocator picks (its large blocks are mappings of their own, often placed in
// the hole a freed mapping leaves); the freed buffer itself still fails as above.
TEST(Registered, MemoryAllocatedAfterAFreeIsUsable) {
  constexpr size_t kBytes = 4 << 20;
  auto results = run_ranks(2, [&](RankContext& ctx) {
    auto comm = ctx.make_comm();
    SharedBuffer b = comm->alloc(kBytes);
    auto* stale = b.as<float>();
    b.free();
    for (size_t bytes = kBytes / 4; bytes <= kBytes; bytes *= 2) {
      std::vector<float> v(bytes / sizeof(float));
      for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 7 + ctx.rank);
      comm->allreduce(v.data(), v.data(), v.size(), DataType::f32, RedOp::sum);
      for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(v[i], static_cast<float>(2 * (i % 7) + 1)) << i;
    }
    float x = 1.0f;
    EXPECT_THROW(comm->allreduce(stale, &x, 1, DataType::f32, RedOp::sum), Error);
  });
  EXPECT_TRUE(all_ok(results));
}

// A range the caller mapped and registered, then deregistered and unmapped: a call on it is the
// clear error; memory mapped again at those addresses is usable. (Two ranges: between the unmap
// and the new mapping of the second, nothing runs that could take its addresses, as a failing
// call's allocations did under ASan.)
TEST(Registered, CallersAddressesMappedAgainAfterDeregisteringAreUsable) {
  constexpr size_t kBytes = 1 << 20;
  auto results = run_ranks(2, [&](RankContext& ctx) {
    auto comm = ctx.make_comm();
    const auto map_registered_then_dropped = [&](const char* what) {
      const std::string name = "/hoop-test-" + std::string(what) + "-" + std::to_string(::getpid());
      const int fd = ::shm_open(name.c_str(), O_CREAT | O_RDWR, 0600);
      EXPECT_GE(fd, 0);
      ::shm_unlink(name.c_str());
      EXPECT_EQ(::ftruncate(fd, kBytes), 0);
      void* where = ::mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      EXPECT_NE(where, MAP_FAILED);
      ::close(fd);
      comm->register_buffer(where, kBytes);
      comm->deregister_buffer(where);
      ::munmap(where, kBytes);
      return where;
    };
    void* gone = map_registered_then_dropped("gone");
    float x = 1.0f;
    EXPECT_THROW(comm->allreduce(static_cast<float*>(gone), &x, 1, DataType::f32, RedOp::sum), Error);
    void* where = map_registered_then_dropped("again");
    void* again = ::mmap(where, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    ASSERT_EQ(again, where) << "the addresses were taken meanwhile";
    auto* v = static_cast<float*>(again);
    const size_t n = kBytes / sizeof(float);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i % 7 + ctx.rank);
    comm->allreduce(v, v, n, DataType::f32, RedOp::sum);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(v[i], static_cast<float>(2 * (i % 7) + 1)) << i;
    ::munmap(again, kBytes);
  });
  EXPECT_TRUE(all_ok(results));
}

// Memory the caller maps itself: a shared mapping of a file in /dev/shm (as torch's
// share_memory_() tensors) registers and goes zero copy; private memory does not register.
TEST(Registered, CallersOwnSharedMappingsRegisterAndPrivateMemoryDoesNot) {
  constexpr size_t kCount = 100003;
  auto results = run_ranks(2, [&](RankContext& ctx) {
    auto comm = ctx.make_comm();
    std::vector<float> priv(16);
    try {
      comm->register_buffer(priv.data(), priv.size() * sizeof(float));
      ADD_FAILURE() << "private memory registered";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << e.what();
      EXPECT_NE(std::string(e.what()).find("shared"), std::string::npos) << e.what();
    }
    const std::string name = "/hoop-test-own-" + std::to_string(::getpid());
    const int fd = ::shm_open(name.c_str(), O_CREAT | O_RDWR, 0600);
    ASSERT_GE(fd, 0);
    ::shm_unlink(name.c_str());
    ASSERT_EQ(::ftruncate(fd, kCount * sizeof(float)), 0);
    void* p = ::mmap(nullptr, kCount * sizeof(float), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ASSERT_NE(p, MAP_FAILED);
    auto* v = static_cast<float*>(p);
    for (size_t i = 0; i < kCount; ++i) v[i] = static_cast<float>(i % 1000) + ctx.rank;
    comm->register_buffer(v, kCount * sizeof(float));
    comm->reset_stats();
    comm->allreduce(v, v, kCount, DataType::f32, RedOp::sum, forced_direct());
    for (size_t i = 0; i < kCount; ++i) ASSERT_EQ(v[i], 2.0f * static_cast<float>(i % 1000) + 1.0f) << i;
    EXPECT_GT(comm->stats().bytes_sent, 0u) << "no zero copy over the caller's own shared mapping";
    comm->deregister_buffer(v);
    ::munmap(p, kCount * sizeof(float));
    ::close(fd);
  }, small_tunables());
  EXPECT_TRUE(all_ok(results));
}

// A rank killed while it holds registered buffers and zero-copy calls run: the survivors fail
// within the timeout, and nothing is left in /dev/shm (the buffers are memfds).
TEST(Registered, AKilledRankLeavesNothingInDevShm) {
  constexpr int kRanks = 3;
  SpawnOptions o = small_tunables();  // leaves /dev/shm as the job left it: the test looks
  auto results = run_ranks(kRanks, [&](RankContext& ctx) {
    CommOptions copts;
    copts.timeout = 5s;
    auto comm = ctx.make_comm(copts);
    ctx.report("JOB " + comm->job_id());
    SharedBuffer b = comm->alloc(1 << 20);
    for (int i = 0;; ++i) {
      if (ctx.rank == 1 && i == 50) ::kill(::getpid(), SIGKILL);
      try {
        comm->allreduce(b.data(), b.data(), (1 << 20) / 4, DataType::f32, RedOp::sum, forced_direct());
      } catch (const Error& e) {
        EXPECT_TRUE(e.code() == ErrorCode::peer_failure || e.code() == ErrorCode::timeout) << e.what();
        return;
      }
    }
  }, o);
  for (const auto& r : results) {
    if (r.rank == 1) continue;
    EXPECT_TRUE(r.ok()) << "rank " << r.rank << " exit " << r.exit_code << " signal " << r.signal;
  }
  expect_no_job_segments(results);
}

}  // namespace
}  // namespace hoop::test
