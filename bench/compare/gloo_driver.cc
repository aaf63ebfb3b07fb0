// Gloo's collectives over its TCP transport on loopback, measured the way hoop-bench measures
// hoop's (see driver_common.h). Started by any launcher that sets HOOP_RANK/HOOP_WORLD_SIZE
// (hoop-run) or OMPI_COMM_WORLD_RANK/SIZE (mpirun); rendezvous through a FileStore directory:
//   hoop-run -n 4 -- gloo_driver --store DIR --op allreduce --sizes 1024 --iters 20 --warmup 5
// Algorithms (--algos, one row each per size; the harness keeps the fastest):
//   allreduce:     ring, bcube (gloo::allreduce, out of place),
//                  ring_chunked, halving_doubling (AllreduceRingChunked/HalvingDoubling, in place)
//   reducescatter: halving_doubling (ReduceScatterHalvingDoubling, in place: Gloo has no other)
//   allgather:     ring (gloo::allgather, out of place)
//   broadcast:     default (gloo::broadcast from rank 0, out of place)
//   reduce:        default (gloo::reduce to rank 0, out of place: a ring ReduceScatter, then
//                  a gather of the blocks to the root)
//   alltoall:      default (gloo::alltoall, out of place)
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/reduce.h>
#include <gloo/reduce_scatter.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <cstdio>
#include <exception>
#include <functional>
#include <memory>

#include "driver_common.h"

namespace {

using namespace compare;
using Ctx = std::shared_ptr<gloo::Context>;

int env_int(const char* a, const char* b) {
  for (const char* name : {a, b}) {
    if (const char* v = std::getenv(name); v && *v) return std::atoi(v);
  }
  throw std::runtime_error(std::string("neither ") + a + " nor " + b + " is set");
}

uint32_t next_tag() {
  static uint32_t tag = 1;
  return tag++;
}

void barrier(const Ctx& ctx) {
  gloo::BarrierOptions opts(ctx);
  opts.setTag(next_tag());
  gloo::barrier(opts);
}

template <typename T>
void allreduce_in_place(const Ctx& ctx, T* data, size_t count, gloo::AllreduceOptions::Func fn) {
  gloo::AllreduceOptions opts(ctx);
  opts.setOutput(data, count);
  opts.setReduceFunction(fn);
  opts.setTag(next_tag());
  gloo::allreduce(opts);
}

struct Buffers {
  std::vector<float> send, recv;
};

// A prepared call of one algorithm on one row's buffers. The legacy algorithm objects bind
// their buffers at construction, so they are built once per row, outside the timing.
using Call = std::function<void()>;

// gloo::allgather, gloo::alltoall: an input, an output and a tag of its own per call.
template <typename Options>
Call input_output_call(const Ctx& ctx, void (*collective)(Options&), float* in, size_t in_count,
                       float* out, size_t out_count) {
  return [=] {
    Options opts(ctx);
    opts.setInput(in, in_count);
    opts.setOutput(out, out_count);
    opts.setTag(next_tag());
    collective(opts);
  };
}

Call make_call(const Ctx& ctx, const std::string& op, const std::string& algo, const Layout& l,
               Buffers& b) {
  float* send = b.send.data();
  float* recv = b.recv.data();
  const size_t count = l.count, block = l.op_count;
  const int n = ctx->size;
  if (op == "allreduce" && (algo == "ring" || algo == "bcube")) {
    const auto which = algo == "ring" ? gloo::AllreduceOptions::Algorithm::RING
                                      : gloo::AllreduceOptions::Algorithm::BCUBE;
    return [=] {
      gloo::AllreduceOptions opts(ctx);
      opts.setAlgorithm(which);
      opts.setInput(send, count);
      opts.setOutput(recv, count);
      opts.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(
          &gloo::sum<float>));
      opts.setTag(next_tag());
      gloo::allreduce(opts);
    };
  }
  if (op == "allreduce" && algo == "ring_chunked") {
    auto a = std::make_shared<gloo::AllreduceRingChunked<float>>(ctx, std::vector<float*>{recv},
                                                                 static_cast<int>(count));
    return [a] { a->run(); };
  }
  if (op == "allreduce" && algo == "halving_doubling") {
    auto a = std::make_shared<gloo::AllreduceHalvingDoubling<float>>(
        ctx, std::vector<float*>{recv}, static_cast<int>(count));
    return [a] { a->run(); };
  }
  if (op == "reducescatter" && algo == "halving_doubling") {
    auto a = std::make_shared<gloo::ReduceScatterHalvingDoubling<float>>(
        ctx, std::vector<float*>{recv}, static_cast<int>(count),
        std::vector<int>(static_cast<size_t>(n), static_cast<int>(block)));
    return [a] { a->run(); };
  }
  if (op == "allgather" && algo == "ring") {
    return input_output_call(ctx, &gloo::allgather, send, block, recv, count);
  }
  if (op == "broadcast" && algo == "default") {
    const bool root = ctx->rank == 0;
    return [=] {
      gloo::BroadcastOptions opts(ctx);
      if (root) opts.setInput(send, count);
      opts.setOutput(recv, count);
      opts.setRoot(0);
      opts.setTag(next_tag());
      gloo::broadcast(opts);
    };
  }
  if (op == "reduce" && algo == "default") {
    // Every rank's output is the ring's scratch: the whole buffer, on the root and elsewhere.
    return [=] {
      gloo::ReduceOptions opts(ctx);
      opts.setInput(send, count);
      opts.setOutput(recv, count);
      opts.setRoot(0);
      opts.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(
          &gloo::sum<float>));
      opts.setTag(next_tag());
      gloo::reduce(opts);
    };
  }
  if (op == "alltoall" && algo == "default") {
    return input_output_call(ctx, &gloo::alltoall, send, count, recv, count);
  }
  throw std::invalid_argument("no Gloo algorithm '" + algo + "' for " + op);
}

bool in_place(const std::string& op, const std::string& algo) {
  return op == "reducescatter" || algo == "ring_chunked" || algo == "halving_doubling";
}

// One call on known inputs; the number of wrong elements over all ranks.
unsigned long long verify(const Ctx& ctx, const std::string& op, const std::string& algo,
                          const Layout& l, Buffers& b, const Call& call) {
  const int rank = ctx->rank, size = ctx->size;
  const size_t block = l.op_count;
  float* input = in_place(op, algo) ? b.recv.data() : b.send.data();
  unsigned long long wrong = 0;
  if (reduces(op)) {
    std::fill(b.recv.begin(), b.recv.end(), -1.0f);
    for (size_t i = 0; i < l.count; ++i) input[i] = input_value(rank, i);
    call();
    // ReduceScatterHalvingDoubling leaves rank r's block at the start of the buffer.
    const ReducedRange r = reduced_range(op, l, rank);
    for (size_t i = 0; i < r.len; ++i) wrong += b.recv[i] != sum_value(size, r.first + i);
  } else if (op == "allgather" || op == "alltoall") {
    const bool gathers = op == "allgather";
    for (size_t i = 0; i < (gathers ? block : l.count); ++i) b.send[i] = input_value(rank, i);
    std::fill(b.recv.begin(), b.recv.end(), -1.0f);
    call();
    for (size_t i = 0; i < l.count; ++i)
      wrong += b.recv[i] != (gathers ? allgather_value(block, i) : alltoall_value(rank, block, i));
  } else {
    for (size_t i = 0; i < l.count; ++i) b.send[i] = input_value(0, i);
    std::fill(b.recv.begin(), b.recv.end(), -1.0f);
    call();
    for (size_t i = 0; i < l.count; ++i) wrong += b.recv[i] != input_value(0, i);
  }
  allreduce_in_place(ctx, &wrong, 1,
                     static_cast<void (*)(void*, const void*, const void*, size_t)>(
                         &gloo::sum<unsigned long long>));
  return wrong;
}

std::vector<std::string> default_algos(const std::string& op) {
  if (op == "allreduce") return {"ring", "bcube", "ring_chunked", "halving_doubling"};
  if (op == "reducescatter") return {"halving_doubling"};
  if (op == "allgather") return {"ring"};
  return {"default"};
}

int run(const DriverArgs& a) {
  if (a.store_dir.empty()) throw std::invalid_argument("--store DIR is required");
  const int rank = env_int("HOOP_RANK", "OMPI_COMM_WORLD_RANK");
  const int size = env_int("HOOP_WORLD_SIZE", "OMPI_COMM_WORLD_SIZE");

  // Loopback on one host; between hosts (bench/netlab), the address of the named interface.
  gloo::transport::tcp::attr attr("127.0.0.1");
  if (!a.iface.empty()) {
    attr.hostname.clear();
    attr.iface = a.iface;
  }
  auto dev = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore store(a.store_dir);
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
  context->setTimeout(std::chrono::seconds(600));
  context->connectFullMesh(store, dev);
  const Ctx ctx = context;

  CsvOut csv(rank == 0 ? a.csv_path : std::string());
  const auto algos = a.algos.empty() ? default_algos(a.op) : a.algos;
  unsigned long long total_wrong = 0;
  for (size_t bytes : a.sizes) {
    const Layout l = layout_for(a.op, bytes, size);
    if (l.count == 0) continue;
    Buffers b;
    b.send = make_buffer(a.op == "allgather" ? l.op_count : l.count);
    b.recv = make_buffer(l.count);
    for (const std::string& algo : algos) {
      const Call call = make_call(ctx, a.op, algo, l, b);
      const unsigned long long wrong = verify(ctx, a.op, algo, l, b, call);
      total_wrong += wrong;
      for (int i = 0; i < a.warmup; ++i) call();
      barrier(ctx);
      std::vector<double> times = time_calls(a.iters, call);
      allreduce_in_place(ctx, times.data(), times.size(),
                         static_cast<void (*)(void*, const void*, const void*, size_t)>(
                             &gloo::max<double>));
      if (rank == 0) csv.row("gloo", a, algo, size, l, median(times), wrong);
    }
  }
  return total_wrong == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse_args(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gloo_driver: %s\n", e.what());
    return 2;
  }
}
