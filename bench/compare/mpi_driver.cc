// Open MPI's collectives, measured the way hoop-bench measures hoop's (see driver_common.h):
//   mpirun -np N mpi_driver --op allreduce --sizes 1024,4096 --iters 20 --warmup 5 --csv out.csv
// Out of place: MPI_Allreduce, MPI_Reduce_scatter_block, MPI_Allgather, MPI_Alltoall, MPI_Reduce
// to rank 0; MPI_Bcast from rank 0.
#include <mpi.h>

#include <cstdio>
#include <exception>

#include "driver_common.h"

namespace {

using namespace compare;

struct Buffers {
  std::vector<float> send, recv;
};

void call(const std::string& op, const Layout& l, Buffers& b) {
  const int n = static_cast<int>(l.op_count);
  if (op == "allreduce") {
    MPI_Allreduce(b.send.data(), b.recv.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  } else if (op == "reducescatter") {
    MPI_Reduce_scatter_block(b.send.data(), b.recv.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  } else if (op == "allgather") {
    MPI_Allgather(b.send.data(), n, MPI_FLOAT, b.recv.data(), n, MPI_FLOAT, MPI_COMM_WORLD);
  } else if (op == "alltoall") {
    MPI_Alltoall(b.send.data(), n, MPI_FLOAT, b.recv.data(), n, MPI_FLOAT, MPI_COMM_WORLD);
  } else if (op == "reduce") {
    MPI_Reduce(b.send.data(), b.recv.data(), n, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD);
  } else {
    MPI_Bcast(b.recv.data(), n, MPI_FLOAT, 0, MPI_COMM_WORLD);
  }
}

// One call on known inputs; the number of wrong elements over all ranks.
unsigned long long verify(const std::string& op, const Layout& l, Buffers& b, int rank, int size) {
  unsigned long long wrong = 0;
  const size_t block = l.op_count;
  if (reduces(op)) {
    for (size_t i = 0; i < l.count; ++i) b.send[i] = input_value(rank, i);
    std::fill(b.recv.begin(), b.recv.end(), -1.0f);
    call(op, l, b);
    const ReducedRange r = reduced_range(op, l, rank);
    for (size_t i = 0; i < r.len; ++i) wrong += b.recv[i] != sum_value(size, r.first + i);
  } else if (op == "allgather" || op == "alltoall") {
    const bool gathers = op == "allgather";
    for (size_t i = 0; i < (gathers ? block : l.count); ++i) b.send[i] = input_value(rank, i);
    std::fill(b.recv.begin(), b.recv.end(), -1.0f);
    call(op, l, b);
    for (size_t i = 0; i < l.count; ++i)
      wrong += b.recv[i] != (gathers ? allgather_value(block, i) : alltoall_value(rank, block, i));
  } else {
    for (size_t i = 0; i < l.count; ++i) b.recv[i] = rank == 0 ? input_value(0, i) : -1.0f;
    call(op, l, b);
    for (size_t i = 0; i < l.count; ++i) wrong += b.recv[i] != input_value(0, i);
  }
  MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  return wrong;
}

int run(const DriverArgs& a) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  CsvOut csv(rank == 0 ? a.csv_path : std::string());
  unsigned long long total_wrong = 0;
  for (size_t bytes : a.sizes) {
    const Layout l = layout_for(a.op, bytes, size);
    if (l.count == 0) continue;
    Buffers b;
    const bool gathers = a.op == "allgather";
    b.send = make_buffer(gathers ? l.op_count : l.count);
    b.recv = make_buffer(a.op == "reducescatter" ? l.op_count : l.count);
    const unsigned long long wrong = verify(a.op, l, b, rank, size);
    total_wrong += wrong;
    for (int i = 0; i < a.warmup; ++i) call(a.op, l, b);
    MPI_Barrier(MPI_COMM_WORLD);
    std::vector<double> times = time_calls(a.iters, [&] { call(a.op, l, b); });
    MPI_Allreduce(MPI_IN_PLACE, times.data(), static_cast<int>(times.size()), MPI_DOUBLE, MPI_MAX,
                  MPI_COMM_WORLD);
    if (rank == 0) csv.row("mpi", a, "default", size, l, median(times), wrong);
  }
  return total_wrong == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int code = 0;
  try {
    code = run(parse_args(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mpi_driver: %s\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  MPI_Finalize();
  return code;
}
