// AllGatherv and ReduceScatterv end to end, every registered algorithm (schedule::algorithms_for)
// on 1, 2, 3, 5 and 8 ranks over shared memory and TCP: uneven counts with zeros for some ranks,
// packed and spread blocks, in and out of place; AllGatherv exact, ReduceScatterv exact on
// integers and against the reference on f32, f16 and bf16 (sum and avg), its float bits the same
// when the call is repeated and in place as out of place.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/coll_job.h"
#include "support/reference.h"
#include "support/vcounts.h"

namespace hoop::test {
namespace {

std::vector<CollCase> make_cases() {
  std::vector<CollCase> cases;
  for (const std::string& algo : schedule::algorithms_for(OpType::allgatherv)) {
    for (int pattern = 0; pattern < kCountPatterns; ++pattern) {
      for (bool in_place : {false, true}) {
        cases.push_back({.op = OpType::allgatherv, .algo = algo, .count = size_t(pattern), .spread = pattern % 2 == 0,
                         .in_place = in_place});
      }
    }
    cases.push_back({.op = OpType::allgatherv, .algo = algo, .dt = DataType::u8, .count = 3, .spread = true});
    cases.push_back({.op = OpType::allgatherv, .algo = algo, .dt = DataType::f64, .count = 4, .in_place = true});
  }
  for (const std::string& algo : schedule::algorithms_for(OpType::reducescatterv)) {
    for (int pattern = 0; pattern < kCountPatterns; ++pattern) {
      for (bool in_place : {false, true}) {
        cases.push_back({.op = OpType::reducescatterv, .algo = algo, .count = size_t(pattern), .in_place = in_place});
      }
    }
    for (RedOp op : {RedOp::sum, RedOp::avg, RedOp::max}) {
      for (DataType dt : {DataType::f32, DataType::f16, DataType::bf16, DataType::i64}) {
        cases.push_back({.op = OpType::reducescatterv, .algo = algo, .dt = dt, .redop = op, .count = 3});
      }
    }
    cases.push_back({.op = OpType::reducescatterv, .algo = algo, .redop = RedOp::prod, .count = 4, .in_place = true});
  }
  return cases;
}

void run_allgatherv(Communicator& comm, const CollCase& c, uint64_t seed, const OpOptions& o) {
  const int r = comm.rank(), n = comm.size();
  const size_t es = dtype_size(c.dt);
  const auto blocks = layout_blocks(recv_counts(c.op, static_cast<int>(c.count), r, n, 0), c.spread);
  const size_t mine = blocks.count(r);
  std::vector<unsigned char> send(mine * es + 1);
  auto recv = sentinel_buffer(blocks.extent() * es);
  unsigned char* in = c.in_place ? recv.data() + blocks.displ(r) * es : send.data();
  ref::fill_inputs(in, c.dt, c.redop, seed, r, 0, mine);
  const std::vector<size_t> none;
  comm.allgatherv(in, recv.data(), blocks.counts, c.spread ? blocks.displs : none, c.dt, o);
  for (int q = 0; q < n; ++q) {
    EXPECT_EQ(ref::check_inputs(recv.data() + blocks.displ(q) * es, c.dt, c.redop, seed, q, 0, blocks.count(q)), "")
        << "block of rank " << q;
  }
  EXPECT_EQ(untouched_outside(recv.data(), recv.size(), blocks, es), "");
}

void run_reducescatterv(Communicator& comm, const CollCase& c, uint64_t seed, const OpOptions& o) {
  const int r = comm.rank(), n = comm.size();
  const size_t es = dtype_size(c.dt);
  const auto blocks = layout_blocks(send_counts(c.op, static_cast<int>(c.count), r, n, 0), false);
  const size_t total = blocks.total(), mine = blocks.count(r);
  auto send = sentinel_buffer(total * es);
  auto recv = sentinel_buffer(mine * es);
  auto call = [&](bool in_place) {
    ref::fill_inputs(send.data(), c.dt, c.redop, seed, r, 0, total);
    unsigned char* out = in_place ? send.data() + blocks.displ(r) * es : recv.data();
    comm.reducescatterv(send.data(), out, blocks.counts, c.dt, c.redop, o);
    EXPECT_EQ(ref::check_reduction(out, c.dt, c.redop, seed, n, blocks.displ(r), mine), "");
    EXPECT_EQ(ref::first_non_sentinel(send.data() + total * es, kGuardBytes), kGuardBytes) << "wrote past the input";
    if (!in_place) {
      EXPECT_EQ(ref::first_non_sentinel(recv.data() + mine * es, kGuardBytes), kGuardBytes) << "wrote past the end";
    }
    return ref::hash_bytes(out, mine * es);
  };
  const uint64_t first = call(c.in_place);
  if (is_float(c.dt)) {
    // Reproducible: the same bits again, and in place as out of place.
    EXPECT_EQ(call(c.in_place), first) << "a repeated call gave other bits";
    EXPECT_EQ(call(!c.in_place), first) << "in place and out of place gave other bits";
  }
}

class VFormsTest : public ::testing::TestWithParam<JobParam> {};

TEST_P(VFormsTest, EveryAlgorithmUnevenCounts) {
  run_cases(GetParam(), make_cases(), [](Communicator& comm, const CollCase& c, uint64_t seed) {
    OpOptions o;
    o.algo = c.algo;
    if (c.op == OpType::allgatherv) {
      run_allgatherv(comm, c, seed, o);
    } else {
      run_reducescatterv(comm, c, seed, o);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(VForms, VFormsTest, ::testing::ValuesIn(job_params()), job_param_name);

}  // namespace
}  // namespace hoop::test
