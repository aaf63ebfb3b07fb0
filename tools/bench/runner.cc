#include "runner.h"

#include <algorithm>
#include <chrono>
#include <utility>

namespace hoop::bench {

namespace {

using Clock = std::chrono::steady_clock;

double micros_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

// One collective in its blocking form, or in its asynchronous form whose handle it returns.
template <class... Params, class... Args>
Work run_form(Communicator& comm, bool async, void (Communicator::*blocking)(Params...),
              Work (Communicator::*nonblocking)(Params...), Args&&... args) {
  if (async) return (comm.*nonblocking)(std::forward<Args>(args)...);
  (comm.*blocking)(std::forward<Args>(args)...);
  return {};
}

size_t max_bytes_of(const std::vector<Layout>& layouts, size_t elem, bool send) {
  size_t most = 0;
  for (const Layout& l : layouts) most = std::max(most, (send ? l.send_count : l.recv_count) * elem);
  return most;
}

}  // namespace

CollectiveRunner::CollectiveRunner(Communicator& comm, const BenchConfig& cfg,
                                   const std::vector<Layout>& layouts)
    : comm_(comm),
      cfg_(cfg),
      verifier_(cfg.collective, cfg.dtype, cfg.op, comm.rank(), comm.size()),
      send_buf_(max_bytes_of(layouts, dtype_size(cfg.dtype), true), cfg.registered ? &comm : nullptr),
      recv_buf_(max_bytes_of(layouts, dtype_size(cfg.dtype), false), cfg.registered ? &comm : nullptr) {}

RowResult CollectiveRunner::run(const Layout& layout, const std::string& algo) {
  OpOptions opts;
  opts.algo = algo;
  const VectorArgs v = vector_args(cfg_.collective, layout, comm_.rank());
  RowResult row;
  row.layout = layout;
  row.out_of_place = measure(call_for(layout, v, false), opts);
  if (has_in_place(cfg_.collective)) row.in_place = measure(call_for(layout, v, true), opts);
  return row;
}

// nccl-tests' in-place conventions (those of include/hoop/communicator.h): AllReduce,
// Broadcast, Reduce and AllToAll work on one buffer; the result of ReduceScatter(v) and
// Scatter(v) is the rank's own block of the send buffer; the input of AllGather(v) and
// Gather(v) is the rank's own block of the recv buffer.
CollectiveRunner::Call CollectiveRunner::call_for(const Layout& layout, const VectorArgs& v,
                                                  bool in_place) {
  std::byte* send = send_buf_.data();
  std::byte* recv = recv_buf_.data();
  if (!in_place) return {layout, v, send, recv};
  const size_t own = v.recv_displs.empty()
                         ? 0
                         : v.recv_displs[static_cast<size_t>(comm_.rank())] * verifier_.elem_size();
  switch (cfg_.collective) {
    case OpType::reducescatter:
    case OpType::reducescatterv:
    case OpType::scatter:
    case OpType::scatterv: return {layout, v, send, send + own};
    case OpType::allgather:
    case OpType::allgatherv:
    case OpType::gather:
    case OpType::gatherv: return {layout, v, recv + own, recv};
    default: return {layout, v, recv, recv};
  }
}

Measurement CollectiveRunner::measure(const Call& c, const OpOptions& opts) {
  Measurement m;
  if (cfg_.check) {
    uint64_t wrong = run_and_verify(c, opts);
    comm_.allreduce(&wrong, &wrong, 1, DataType::u64, RedOp::sum);
    m.wrong = wrong;
  }
  time_iterations(c, opts, cfg_.warmup_iters);
  comm_.barrier();  // every rank starts the timed loop together
  std::vector<double> times = time_iterations(c, opts, cfg_.iters);
  m.algo_used = comm_.last_algorithm();  // before combining the times, itself an operation
  m.time = combine_over_ranks(std::move(times));
  m.algbw_gbps = algbw_gbps(c.layout.bytes, m.time.median);
  m.busbw_gbps = m.algbw_gbps * busbw_factor(cfg_.collective, comm_.size());
  return m;
}

uint64_t CollectiveRunner::run_and_verify(const Call& c, const OpOptions& opts) {
  const DataPlan plan =
      data_plan(cfg_.collective, c.layout, c.v, comm_.rank(), comm_.size(), cfg_.root);
  auto* recv = static_cast<std::byte*>(c.recv);
  const size_t elem = verifier_.elem_size();
  // Poison the outputs first, then write the inputs: in place they overlap, and the inputs win.
  for (const ExpectedBlock& o : plan.outputs) verifier_.poison(recv + o.offset * elem, o.count);
  verifier_.fill_input(c.send, plan.input_count);

  issue(c, opts, false);

  uint64_t wrong = 0;
  for (const ExpectedBlock& o : plan.outputs) {
    const std::byte* got = recv + o.offset * elem;
    wrong += o.source == kReduced ? verifier_.count_wrong_reduced(got, o.count, o.first)
                                  : verifier_.count_wrong_input(o.source, got, o.count, o.first);
  }
  return wrong;
}

std::vector<double> CollectiveRunner::time_iterations(const Call& c, const OpOptions& opts,
                                                      int iterations) {
  std::vector<double> times;
  if (iterations <= 0) return times;
  if (cfg_.blocking) {
    times.reserve(static_cast<size_t>(iterations));
    for (int i = 0; i < iterations; ++i) {
      const auto start = Clock::now();
      issue(c, opts, false);
      times.push_back(micros_between(start, Clock::now()));
    }
    return times;
  }
  // Asynchronous: issue every iteration, then wait for all; only the mean per op is known.
  std::vector<Work> pending;
  pending.reserve(static_cast<size_t>(iterations));
  const auto start = Clock::now();
  for (int i = 0; i < iterations; ++i) pending.push_back(issue(c, opts, true));
  for (Work& w : pending) w.wait();
  times.push_back(micros_between(start, Clock::now()) / iterations);
  return times;
}

// Combines each iteration's time over the ranks (with hoop itself, after the timing), then
// takes the statistics over iterations.
TimeStats CollectiveRunner::combine_over_ranks(std::vector<double> times) {
  const size_t n = times.size();
  switch (cfg_.combine) {
    case RankCombine::rank0: break;  // rank 0 prints its own times
    case RankCombine::mean:
      comm_.allreduce(times.data(), times.data(), n, DataType::f64, RedOp::sum);
      for (double& t : times) t /= comm_.size();
      break;
    case RankCombine::min:
      comm_.allreduce(times.data(), times.data(), n, DataType::f64, RedOp::min);
      break;
    case RankCombine::max:
      comm_.allreduce(times.data(), times.data(), n, DataType::f64, RedOp::max);
      break;
  }
  return time_stats(times);
}

Work CollectiveRunner::issue(const Call& c, const OpOptions& opts, bool async) {
  const DataType dt = cfg_.dtype;
  const RedOp op = cfg_.op;
  const int root = cfg_.root;
  const size_t n = c.layout.op_count;
  const VectorArgs& v = c.v;
  const size_t own = c.layout.blocks.empty() ? 0 : c.layout.blocks[static_cast<size_t>(comm_.rank())];
  using C = Communicator;
  switch (cfg_.collective) {
    case OpType::allreduce:
      return run_form(comm_, async, &C::allreduce, &C::allreduce_async, c.send, c.recv, n, dt, op, opts);
    case OpType::reducescatter:
      return run_form(comm_, async, &C::reducescatter, &C::reducescatter_async, c.send, c.recv, n, dt,
                      op, opts);
    case OpType::allgather:
      return run_form(comm_, async, &C::allgather, &C::allgather_async, c.send, c.recv, n, dt, opts);
    case OpType::broadcast:
      return run_form(comm_, async, &C::broadcast, &C::broadcast_async, c.send, c.recv, n, dt, root,
                      opts);
    case OpType::reduce:
      return run_form(comm_, async, &C::reduce, &C::reduce_async, c.send, c.recv, n, dt, op, root,
                      opts);
    case OpType::alltoall:
      return run_form(comm_, async, &C::alltoall, &C::alltoall_async, c.send, c.recv, n, dt, opts);
    case OpType::gather:
      return run_form(comm_, async, &C::gather, &C::gather_async, c.send, c.recv, n, dt, root, opts);
    case OpType::scatter:
      return run_form(comm_, async, &C::scatter, &C::scatter_async, c.send, c.recv, n, dt, root, opts);
    case OpType::alltoallv:
      return run_form(comm_, async, &C::alltoallv, &C::alltoallv_async, c.send, v.send_counts,
                      v.send_displs, c.recv, v.recv_counts, v.recv_displs, dt, opts);
    case OpType::gatherv:
      return run_form(comm_, async, &C::gatherv, &C::gatherv_async, c.send, own, c.recv,
                      v.recv_counts, v.recv_displs, dt, root, opts);
    case OpType::scatterv:
      return run_form(comm_, async, &C::scatterv, &C::scatterv_async, c.send, v.send_counts,
                      v.send_displs, c.recv, own, dt, root, opts);
    case OpType::allgatherv:
      return run_form(comm_, async, &C::allgatherv, &C::allgatherv_async, c.send, c.recv,
                      v.recv_counts, v.recv_displs, dt, opts);
    case OpType::reducescatterv:
      return run_form(comm_, async, &C::reducescatterv, &C::reducescatterv_async, c.send, c.recv,
                      v.recv_counts, dt, op, opts);
    default: return {};
  }
}

}  // namespace hoop::bench
