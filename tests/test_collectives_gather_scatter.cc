// Gather(v) and Scatter(v) end to end, every registered algorithm (schedule::algorithms_for)
// and every root on 1, 2, 3, 5 and 8 ranks over shared memory and TCP: exact data, counts 0,
// 1, primes and non-multiples of N, uneven v-counts with zeros, packed and spread blocks, in
// and out of place at the root, nothing written outside the blocks, past the end or (Gather)
// on a non-root.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/coll_job.h"
#include "support/reference.h"
#include "support/vcounts.h"

namespace hoop::test {
namespace {

bool is_v(OpType op) { return op == OpType::gatherv || op == OpType::scatterv; }

std::vector<CollCase> make_cases(int n) {
  std::vector<CollCase> cases;
  for (OpType op : {OpType::gather, OpType::scatter, OpType::gatherv, OpType::scatterv}) {
    for (const std::string& algo : schedule::algorithms_for(op)) {
      for (int root = 0; root < n; ++root) {
        for (bool in_place : {false, true}) {
          if (is_v(op)) {
            for (int pattern = 0; pattern < kCountPatterns; ++pattern) {
              cases.push_back({.op = op, .algo = algo, .count = size_t(pattern), .root = root,
                               .spread = (pattern + root) % 2 == 1, .in_place = in_place});
            }
          } else {
            for (size_t count : {size_t{0}, size_t{1}, size_t{13}, static_cast<size_t>(7 * n + 3)}) {
              cases.push_back({.op = op, .algo = algo, .count = count, .root = root, .in_place = in_place});
            }
          }
        }
      }
      cases.push_back({.op = op, .algo = algo, .dt = DataType::u8, .count = is_v(op) ? size_t{3} : size_t{1009},
                       .root = n - 1, .spread = true});
      cases.push_back({.op = op, .algo = algo, .dt = DataType::f64, .count = is_v(op) ? size_t{2} : size_t{5},
                       .root = n / 2, .in_place = true});
    }
  }
  return cases;
}

void run_case(Communicator& comm, const CollCase& c, uint64_t seed) {
  const int r = comm.rank(), n = comm.size();
  const bool root = r == c.root;
  const size_t es = dtype_size(c.dt);
  OpOptions o;
  o.algo = c.algo;
  const int pattern = static_cast<int>(c.count);
  // The root's blocks, and this rank's own count.
  schedule::Blocks blocks = schedule::Blocks::uniform(c.count, n);
  size_t mine = c.count;
  if (is_v(c.op)) {
    const auto counts = c.op == OpType::gatherv ? recv_counts(c.op, pattern, c.root, n, c.root)
                                                : send_counts(c.op, pattern, c.root, n, c.root);
    blocks = layout_blocks(counts, c.spread);
    mine = own_count(c.op, pattern, r, n, c.root);
  }
  const std::vector<size_t> none;
  const std::vector<size_t>& displs = c.spread ? blocks.displs : none;
  const bool in_place = c.in_place && root;
  if (c.op == OpType::gather || c.op == OpType::gatherv) {
    std::vector<unsigned char> send(mine * es + 1);
    auto recv = sentinel_buffer(blocks.extent() * es);
    unsigned char* in = in_place ? recv.data() + blocks.displ(r) * es : send.data();
    ref::fill_inputs(in, c.dt, RedOp::sum, seed, r, 0, mine);
    if (c.op == OpType::gather) {
      comm.gather(in, recv.data(), c.count, c.dt, c.root, o);
    } else {
      comm.gatherv(in, mine, recv.data(), blocks.counts, displs, c.dt, c.root, o);
    }
    if (root) {
      for (int q = 0; q < n; ++q) {
        EXPECT_EQ(ref::check_inputs(recv.data() + blocks.displ(q) * es, c.dt, RedOp::sum, seed, q, 0, blocks.count(q)),
                  "")
            << "block of rank " << q;
      }
      EXPECT_EQ(untouched_outside(recv.data(), recv.size(), blocks, es), "");
    } else {
      EXPECT_EQ(ref::first_non_sentinel(recv.data(), recv.size()), recv.size()) << "a non-root's recv was written";
    }
  } else {
    std::vector<unsigned char> send(blocks.extent() * es + 1);
    auto recv = sentinel_buffer(mine * es);
    ref::fill_inputs(send.data(), c.dt, RedOp::sum, seed, c.root, 0, blocks.extent());
    const uint64_t before = ref::hash_bytes(send.data(), send.size());
    unsigned char* out = in_place ? send.data() + blocks.displ(r) * es : recv.data();
    if (c.op == OpType::scatter) {
      comm.scatter(send.data(), out, c.count, c.dt, c.root, o);
    } else {
      comm.scatterv(send.data(), blocks.counts, displs, out, mine, c.dt, c.root, o);
    }
    EXPECT_EQ(ref::check_inputs(out, c.dt, RedOp::sum, seed, c.root, blocks.displ(r), mine), "");
    EXPECT_EQ(ref::hash_bytes(send.data(), send.size()), before) << "the root's input was modified";
    if (!in_place) {
      EXPECT_EQ(ref::first_non_sentinel(recv.data() + mine * es, kGuardBytes), kGuardBytes) << "wrote past the end";
    }
  }
}

class GatherScatterTest : public ::testing::TestWithParam<JobParam> {};

TEST_P(GatherScatterTest, EveryAlgorithmEveryRootExact) {
  run_cases(GetParam(), make_cases(GetParam().nranks), run_case);
}

INSTANTIATE_TEST_SUITE_P(GatherScatter, GatherScatterTest, ::testing::ValuesIn(job_params()), job_param_name);

}  // namespace
}  // namespace hoop::test
