// Bad calls of the rest of the collective set: invalid arguments (span sizes, counts and
// displacements that overflow, null buffers, bad roots, a rank's own block with two counts,
// overlapping buffers) fail at once with invalid_argument naming the rank, the op and the bad
// value, write nothing and send nothing; a sender whose count differs from its receiver's is a
// mismatch error naming both sizes and the peer, over shared memory and TCP, and the receiver's
// buffer is not written past its blocks.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "support/coll_job.h"
#include "support/reference.h"

namespace hoop::test {
namespace {

constexpr size_t kHuge = SIZE_MAX / 2;
using V = std::vector<size_t>;

// Runs `call` and expects `code` with every piece of `want` in its message.
void expect_error(const std::function<void()>& call, ErrorCode code, const std::vector<std::string>& want,
                  const std::string& what) {
  try {
    call();
    ADD_FAILURE() << what << ": no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << what << ": " << e.what();
    for (const std::string& w : want) EXPECT_NE(std::string(e.what()).find(w), std::string::npos) << what << ": " << e.what();
  }
}

TEST(CollectivesVErrors, InvalidArgumentsFailAtOnceAndSendNothing) {
  run_job({3, "shm"}, [](RankContext&, Communicator& comm) {
    const int r = comm.rank();
    const std::string me = "rank " + std::to_string(r);
    std::vector<int32_t> send(64, 7);
    auto recv = sentinel_buffer(64 * sizeof(int32_t));
    const std::vector<size_t> three{1, 1, 1}, two{1, 1}, none;
    auto inv = [&](const std::function<void()>& call, const std::string& op, const std::string& value,
                   const std::string& what) {
      expect_error(call, ErrorCode::invalid_argument, {me, op, value}, what);
    };
    // Only rank 0 makes the bad calls: had they taken a sequence number, the valid calls below
    // would no longer match between the ranks.
    if (r == 0) {
      inv([&] { comm.alltoallv(send.data(), two, none, recv.data(), three, none, DataType::i32); }, "alltoallv",
          "sendcounts has 2 entries", "short sendcounts");
      inv([&] { comm.alltoallv(send.data(), three, two, recv.data(), three, none, DataType::i32); }, "alltoallv",
          "sdispls has 2 entries", "short sdispls");
      inv([&] { comm.alltoallv(send.data(), three, none, recv.data(), V{2, 1, 1}, none, DataType::i32); },
          "alltoallv", "sendcounts[0] is 1 but recvcounts[0] is 2", "own block with two counts");
      inv([&] { comm.alltoallv(send.data(), three, none, recv.data(), three, V{0, kHuge, 2}, DataType::i32); },
          "alltoallv", std::to_string(kHuge), "displacement past the address space");
      inv([&] { comm.alltoallv(send.data(), three, none, send.data(), three, none, DataType::i32); }, "alltoallv",
          "overlap", "send == recv");
      inv([&] { comm.allgatherv(send.data(), recv.data(), V{1, kHuge, kHuge}, none, DataType::i32); }, "allgatherv",
          "overflows", "counts whose packed displacements overflow");
      inv([&] { comm.allgatherv(send.data(), nullptr, three, none, DataType::i32); }, "allgatherv",
          "recv buffer is null", "null recv");
      inv([&] { comm.reducescatterv(send.data(), recv.data(), two, DataType::i32, RedOp::sum); }, "reducescatterv",
          "recvcounts has 2 entries", "short recvcounts");
      inv([&] { comm.reducescatterv(send.data(), recv.data(), three, DataType::i32, static_cast<RedOp>(9)); },
          "reducescatterv", "9", "bad redop");
      inv([&] { comm.gather(send.data(), recv.data(), 1, DataType::i32, 3); }, "gather", "root 3", "root == N");
      inv([&] { comm.scatter(send.data(), recv.data(), 1, DataType::i32, -1); }, "scatter", "root -1", "negative root");
      inv([&] { comm.gather(nullptr, recv.data(), 1, DataType::i32, 1); }, "gather", "send buffer is null", "null send");
      inv([&] { comm.alltoall(send.data(), recv.data(), kHuge, DataType::i32); }, "alltoall", std::to_string(kHuge),
          "count overflow");
      inv([&] { comm.gatherv(send.data(), 1, recv.data(), two, none, DataType::i32, 0); }, "gatherv",
          "recvcounts has 2 entries", "short recvcounts at the root");
      inv([&] { comm.gatherv(send.data(), 2, recv.data(), three, none, DataType::i32, 0); }, "gatherv",
          "recvcounts[0] is 1 but the root's sendcount is 2", "the root's own block with two counts");
      inv([&] { comm.scatterv(send.data(), three, V{0, 1, kHuge}, recv.data(), 1, DataType::i32, 0); }, "scatterv",
          std::to_string(kHuge), "displacement past the address space");
      EXPECT_EQ(ref::first_non_sentinel(recv.data(), recv.size()), recv.size()) << "a refused call wrote";
    }
    // A non-root's gatherv ignores recvcounts; zero counts need no buffers.
    comm.gatherv(send.data(), 1, recv.data(), r == 1 ? three : none, none, DataType::i32, 1);
    comm.allgatherv(nullptr, nullptr, V{0, 0, 0}, none, DataType::i32);
    comm.alltoall(send.data(), recv.data(), 2, DataType::i32);
    EXPECT_EQ(comm.stats().ops, 3u);
  });
}

// A sender whose count differs from what its receiver expects: the receiver fails with a
// mismatch naming both sizes, the op and the peer, before writing anything.
void mismatch_job(const char* transport, OpType op) {
  run_job({3, transport}, [&](RankContext&, Communicator& comm) {
    const int r = comm.rank();
    std::vector<int32_t> send(32, r);
    auto recv = sentinel_buffer(32 * sizeof(int32_t));
    const std::vector<size_t> none;
    // Rank 1 sends 4 elements where rank 0 expects 5 (AllToAllv, Gatherv at root 0) or rank 0
    // sends 5 where rank 2 expects 4 (Scatterv from root 0).
    std::function<void()> call;
    int victim = 0;
    std::string sizes = "rank 1 sends 16 bytes (4 elements) to rank 0, which expects 20 bytes (5 elements)";
    switch (op) {
      case OpType::alltoallv: {
        const V sc = r == 1 ? V{4, 2, 2} : V{2, 2, 2}, rc = r == 0 ? V{2, 5, 2} : V{2, 2, 2};
        call = [&, sc, rc] { comm.alltoallv(send.data(), sc, none, recv.data(), rc, none, DataType::i32); };
        break;
      }
      case OpType::gatherv:
        call = [&] { comm.gatherv(send.data(), r == 1 ? 4 : 2, recv.data(), V{2, 5, 2}, none, DataType::i32, 0); };
        break;
      default:
        victim = 2;
        sizes = "rank 0 sends 20 bytes (5 elements) to rank 2, which expects 16 bytes (4 elements)";
        call = [&] { comm.scatterv(send.data(), V{2, 2, 5}, none, recv.data(), r == 2 ? 4 : 2, DataType::i32, 0); };
        break;
    }
    if (r == victim) {
      expect_error(call, ErrorCode::mismatch, {"rank " + std::to_string(victim), std::string(to_string(op)), sizes},
                   std::string(to_string(op)) + " over " + transport);
      size_t end = 0;  // the victim's blocks
      if (op == OpType::alltoallv) end = 11 * sizeof(int32_t);
      if (op == OpType::gatherv) end = 9 * sizeof(int32_t);
      if (op == OpType::scatterv) end = 4 * sizeof(int32_t);
      EXPECT_EQ(ref::first_non_sentinel(recv.data() + end, recv.size() - end), recv.size() - end)
          << "written past the blocks";
    } else {
      try {
        call();  // may finish before the victim fails, or fail as a consequence
      } catch (const Error& e) {
        EXPECT_NE(e.code(), ErrorCode::invalid_argument) << e.what();
      }
    }
  });
}

TEST(CollectivesVErrors, CountMismatchAllToAllv) {
  mismatch_job("shm", OpType::alltoallv);
  mismatch_job("tcp", OpType::alltoallv);
}
TEST(CollectivesVErrors, CountMismatchGatherv) {
  mismatch_job("shm", OpType::gatherv);
  mismatch_job("tcp", OpType::gatherv);
}
TEST(CollectivesVErrors, CountMismatchScatterv) {
  mismatch_job("shm", OpType::scatterv);
  mismatch_job("tcp", OpType::scatterv);
}

}  // namespace
}  // namespace hoop::test
