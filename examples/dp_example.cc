// Data parallelism without torch (libhoop_dp): one tensor, every rank feeds the gradient
// rank + 1, and one SGD step with learning rate 1 leaves 1 - mean(rank + 1) everywhere.
//   hoop-run -n 4 -- ./dp_example
#include <hoop/dp.h>
#include <hoop/hoop.h>

#include <cstdio>
#include <vector>

int main() {
  try {
    auto comm = hoop::Communicator::from_env();
    const int n = comm->size();
    hoop::dp::DpConfig cfg;
    cfg.optimizer.kind = hoop::dp::OptimizerKind::sgd;
    cfg.optimizer.lr = 1.0f;
    hoop::dp::DataParallel dp(comm, cfg);
    const std::vector<float> initial(8, 1.0f);
    dp.register_param("w", initial.size(), 0, initial.data());
    dp.finalize();
    dp.layer_params(0, hoop::dp::Phase::forward);
    dp.release_layer(0, hoop::dp::Phase::forward);
    dp.layer_params(0, hoop::dp::Phase::backward);
    const std::vector<float> grads(initial.size(), static_cast<float>(comm->rank() + 1));
    dp.layer_grads(0, grads.data());
    dp.release_layer(0, hoop::dp::Phase::backward);
    dp.step();
    const float expected = 1.0f - static_cast<float>(n + 1) / 2.0f;
    for (float x : dp.gather_tensor(0)) {
      if (x != expected) {
        std::fprintf(stderr, "rank %d: got %g, expected %g\n", comm->rank(), x, expected);
        return 1;
      }
    }
    std::printf("rank %d of %d: data-parallel step ok\n", comm->rank(), n);
    return 0;
  } catch (const hoop::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
