// Soak: thousands of random collectives (op, dtype, reduction, size, root, in place or not)
// on 4 ranks, several in flight at once on several communicators (the world and ones split
// from it), every result checked exactly. Short by default; HOOP_SOAK_OPS=n or
// HOOP_TEST_LONG=1 (20000 operations) for the long run.
#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "support/random_ops.h"
#include "support/spawn.h"

namespace hoop::test {
namespace {

using namespace std::chrono_literals;

size_t soak_ops(size_t short_default) {
  if (const char* n = std::getenv("HOOP_SOAK_OPS")) return std::strtoull(n, nullptr, 10);
  if (const char* l = std::getenv("HOOP_TEST_LONG"); l && std::string(l) == "1") return 20000;
  return short_default;
}

uint64_t soak_seed() {
  if (const char* s = std::getenv("HOOP_SOAK_SEED")) return std::strtoull(s, nullptr, 0);
  return std::random_device{}();
}

void soak(const char* transport, size_t ops, size_t max_count) {
  constexpr int kRanks = 4;
  const uint64_t seed = soak_seed();
  std::cout << "soak: " << ops << " operations over " << transport << ", seed " << seed
            << " (HOOP_SOAK_SEED to replay)\n";
  SpawnOptions opts;
  opts.timeout = 600s;
  opts.env.emplace_back("HOOP_TRANSPORT", transport);
  auto results = run_ranks(kRanks, [&](RankContext& ctx) {
    CommOptions copts;
    copts.timeout = 60s;
    auto world = ctx.make_comm(copts);
    // Communicators: the world, the pair this rank belongs to (even/odd ranks), and the world
    // again with the ranks in reverse order.
    std::vector<std::shared_ptr<Communicator>> comms{world, world->split(ctx.rank % 2, ctx.rank),
                                                     world->split(0, -ctx.rank)};
    ASSERT_EQ(comms[1]->size(), 2);
    ASSERT_EQ(comms[2]->rank(), kRanks - 1 - ctx.rank);
    std::mt19937_64 rng(seed);  // the same draws on every rank
    size_t done = 0, batches = 0, overlapped = 0;
    uint64_t tag = 0;
    while (done < ops) {
      // A batch of 1-4 operations, each on a random communicator, all started before any is
      // waited for: operations of one communicator queue in order, those of different ones
      // run at the same time.
      const size_t batch = 1 + rng() % 4;
      std::vector<OpBuffers> bufs;
      std::vector<Work> works;
      bufs.reserve(batch);
      for (size_t b = 0; b < batch && done < ops; ++b, ++done) {
        Communicator& c = *comms[rng() % comms.size()];
        const RandomOp op = draw_op(rng, c.size(), max_count);
        // Inputs depend on the communicator's own ranks, so the tag names the op only.
        bufs.emplace_back(op, ++tag, c.rank(), c.size());
        const bool async = rng() % 4 != 0;
        if (async) {
          works.push_back(bufs.back().start(c));
        } else {
          // A blocking call waits for its communicator's earlier queued ops.
          works.push_back(Work());
          bufs.back().run(c);
        }
      }
      overlapped += works.size() > 1 ? works.size() : 0;
      for (size_t i = 0; i < works.size(); ++i) {
        if (works[i].valid()) works[i].wait();
        const std::string bad = bufs[i].verify();
        if (!bad.empty()) {
          ADD_FAILURE() << "operation " << (done - works.size() + i) << ": " << bad;
          return;
        }
      }
      ++batches;
    }
    for (auto& c : comms) c->barrier();
    ctx.report("OPS " + std::to_string(done) + " batches " + std::to_string(batches) +
               " overlapped " + std::to_string(overlapped));
  }, opts);
  for (const auto& r : results) {
    for (const auto& line : r.reports) std::cout << "  rank " << r.rank << ": " << line << "\n";
  }
  EXPECT_TRUE(all_ok(results)) << "seed " << seed;
}

TEST(Soak, RandomCollectivesOverSharedMemory) { soak("shm", soak_ops(5000), 1 << 16); }

TEST(Soak, RandomCollectivesOverTcp) { soak("tcp", soak_ops(5000) / 4, 1 << 15); }

}  // namespace
}  // namespace hoop::test
