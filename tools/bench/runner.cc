#include "runner.h"

#include <algorithm>
#include <chrono>

namespace hoop::bench {

namespace {

using Clock = std::chrono::steady_clock;

double micros_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
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
      send_buf_(max_bytes_of(layouts, dtype_size(cfg.dtype), true)),
      recv_buf_(max_bytes_of(layouts, dtype_size(cfg.dtype), false)) {}

RowResult CollectiveRunner::run(const Layout& layout, const std::string& algo) {
  OpOptions opts;
  opts.algo = algo;
  RowResult row;
  row.layout = layout;
  row.out_of_place = measure(layout, false, opts);
  row.in_place = measure(layout, true, opts);
  return row;
}

// nccl-tests' in-place conventions: AllReduce, Broadcast and Reduce work on one buffer;
// ReduceScatter's result is the rank's own slice of the send buffer; AllGather's input is the
// rank's own slice of the recv buffer.
CollectiveRunner::CallBuffers CollectiveRunner::buffers_for(const Layout& layout, bool in_place) {
  const size_t slice = static_cast<size_t>(comm_.rank()) * layout.op_count * verifier_.elem_size();
  if (!in_place) return {send_buf_.data(), recv_buf_.data()};
  switch (cfg_.collective) {
    case OpType::reducescatter: return {send_buf_.data(), send_buf_.data() + slice};
    case OpType::allgather: return {recv_buf_.data() + slice, recv_buf_.data()};
    default: return {recv_buf_.data(), recv_buf_.data()};
  }
}

Measurement CollectiveRunner::measure(const Layout& layout, bool in_place, const OpOptions& opts) {
  const CallBuffers b = buffers_for(layout, in_place);
  Measurement m;
  if (cfg_.check) {
    uint64_t wrong = run_and_verify(layout, b, opts);
    comm_.allreduce(&wrong, &wrong, 1, DataType::u64, RedOp::sum);
    m.wrong = wrong;
  }
  time_iterations(layout, b, opts, cfg_.warmup_iters);
  comm_.barrier();  // every rank starts the timed loop together
  std::vector<double> times = time_iterations(layout, b, opts, cfg_.iters);
  m.algo_used = comm_.last_algorithm();  // before combining the times, itself an operation
  m.time_us = combine_over_ranks(std::move(times));
  m.algbw_gbps = algbw_gbps(layout.bytes, m.time_us);
  m.busbw_gbps = m.algbw_gbps * busbw_factor(cfg_.collective, comm_.size());
  return m;
}

uint64_t CollectiveRunner::run_and_verify(const Layout& layout, const CallBuffers& b,
                                          const OpOptions& opts) {
  const int rank = comm_.rank();
  const int root = cfg_.root;
  void* send = b.send;
  // Poison the outputs first, then write the inputs: in place they overlap, and the inputs win.
  switch (cfg_.collective) {
    case OpType::allreduce:
      verifier_.poison(b.recv, layout.count);
      verifier_.fill_input(send, layout.count);
      break;
    case OpType::reduce:
      if (rank == root) verifier_.poison(b.recv, layout.count);
      verifier_.fill_input(send, layout.count);
      break;
    case OpType::broadcast:
      verifier_.poison(b.recv, layout.count);
      if (rank == root) verifier_.fill_input(send, layout.count);
      break;
    case OpType::reducescatter:
      verifier_.poison(b.recv, layout.op_count);
      verifier_.fill_input(send, layout.count);
      break;
    case OpType::allgather:
      verifier_.poison(b.recv, layout.count);
      verifier_.fill_input(send, layout.op_count);
      break;
    default: break;
  }

  call(layout, b, opts);

  const size_t elem = verifier_.elem_size();
  switch (cfg_.collective) {
    case OpType::allreduce: return verifier_.count_wrong_reduced(b.recv, layout.count, 0);
    case OpType::reduce:
      return rank == root ? verifier_.count_wrong_reduced(b.recv, layout.count, 0) : 0;
    case OpType::broadcast: return verifier_.count_wrong_input(root, b.recv, layout.count, 0);
    case OpType::reducescatter: {
      const size_t first = static_cast<size_t>(rank) * layout.op_count;
      return verifier_.count_wrong_reduced(b.recv, layout.op_count, first);
    }
    case OpType::allgather: {
      uint64_t wrong = 0;
      const auto* recv = static_cast<const std::byte*>(b.recv);
      for (int r = 0; r < comm_.size(); ++r) {
        const size_t block = static_cast<size_t>(r) * layout.op_count;
        wrong += verifier_.count_wrong_input(r, recv + block * elem, layout.op_count, 0);
      }
      return wrong;
    }
    default: return 0;
  }
}

std::vector<double> CollectiveRunner::time_iterations(const Layout& layout, const CallBuffers& b,
                                                      const OpOptions& opts, int iterations) {
  std::vector<double> times;
  if (iterations <= 0) return times;
  if (cfg_.blocking) {
    times.reserve(static_cast<size_t>(iterations));
    for (int i = 0; i < iterations; ++i) {
      const auto start = Clock::now();
      call(layout, b, opts);
      times.push_back(micros_between(start, Clock::now()));
    }
    return times;
  }
  // Asynchronous: issue every iteration, then wait for all; only the mean per op is known.
  std::vector<Work> pending;
  pending.reserve(static_cast<size_t>(iterations));
  const auto start = Clock::now();
  for (int i = 0; i < iterations; ++i) pending.push_back(call_async(layout, b, opts));
  for (Work& w : pending) w.wait();
  times.push_back(micros_between(start, Clock::now()) / iterations);
  return times;
}

// Combines each iteration's time over the ranks (with hoop itself, after the timing), then
// takes the median over iterations.
double CollectiveRunner::combine_over_ranks(std::vector<double> times) {
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
  return median(std::move(times));
}

void CollectiveRunner::call(const Layout& layout, const CallBuffers& b, const OpOptions& opts) {
  const DataType dt = cfg_.dtype;
  switch (cfg_.collective) {
    case OpType::allreduce:
      return comm_.allreduce(b.send, b.recv, layout.op_count, dt, cfg_.op, opts);
    case OpType::reducescatter:
      return comm_.reducescatter(b.send, b.recv, layout.op_count, dt, cfg_.op, opts);
    case OpType::allgather: return comm_.allgather(b.send, b.recv, layout.op_count, dt, opts);
    case OpType::broadcast:
      return comm_.broadcast(b.send, b.recv, layout.op_count, dt, cfg_.root, opts);
    case OpType::reduce:
      return comm_.reduce(b.send, b.recv, layout.op_count, dt, cfg_.op, cfg_.root, opts);
    default: return;
  }
}

Work CollectiveRunner::call_async(const Layout& layout, const CallBuffers& b,
                                  const OpOptions& opts) {
  const DataType dt = cfg_.dtype;
  switch (cfg_.collective) {
    case OpType::allreduce:
      return comm_.allreduce_async(b.send, b.recv, layout.op_count, dt, cfg_.op, opts);
    case OpType::reducescatter:
      return comm_.reducescatter_async(b.send, b.recv, layout.op_count, dt, cfg_.op, opts);
    case OpType::allgather:
      return comm_.allgather_async(b.send, b.recv, layout.op_count, dt, opts);
    case OpType::broadcast:
      return comm_.broadcast_async(b.send, b.recv, layout.op_count, dt, cfg_.root, opts);
    case OpType::reduce:
      return comm_.reduce_async(b.send, b.recv, layout.op_count, dt, cfg_.op, cfg_.root, opts);
    default: return {};
  }
}

}  // namespace hoop::bench
