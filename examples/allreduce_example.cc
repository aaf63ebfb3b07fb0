// The smallest hoop program: every rank contributes its rank number, AllReduce sums them.
//   hoop-run -n 4 -- ./allreduce_example
#include <hoop/hoop.h>

#include <cstdio>
#include <vector>

int main() {
  try {
    auto comm = hoop::Communicator::from_env();
    const int n = comm->size();
    std::vector<float> data(1000, static_cast<float>(comm->rank()));
    comm->allreduce(data.data(), data.data(), data.size(), hoop::DataType::f32, hoop::RedOp::sum);
    const float expected = static_cast<float>(n * (n - 1) / 2);
    for (float x : data) {
      if (x != expected) {
        std::fprintf(stderr, "rank %d: got %g, expected %g\n", comm->rank(), x, expected);
        return 1;
      }
    }
    std::printf("rank %d of %d: allreduce ok (sum of ranks = %g), hoop %s\n", comm->rank(), n,
                expected, HOOP_VERSION_STRING);
    comm->barrier();
    return 0;
  } catch (const hoop::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
