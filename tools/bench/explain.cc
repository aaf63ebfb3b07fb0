#include "explain.h"

#include <fmt/format.h>

#include "comm/algo_choice.h"
#include "comm/comm_impl.h"

namespace hoop::bench {

void print_explanation(Communicator& comm, const BenchConfig& cfg, const Layout& layout, const RowResult& row) {
  schedule::CollectiveDesc d;
  d.op = cfg.collective;
  d.count = layout.op_count;
  d.nranks = comm.size();
  d.root = cfg.root;
  d.redop = cfg.op;
  const bool half = cfg.dtype == DataType::f16 || cfg.dtype == DataType::bf16;
  const bool reducing = cfg.collective == OpType::allreduce || cfg.collective == OpType::reducescatter ||
                        cfg.collective == OpType::reduce;
  const size_t elem = half && reducing ? sizeof(float) : dtype_size(cfg.dtype);
  auto& tuner = comm.impl().tuner();
  const auto priced = tuner.price_all(d, elem, detail::candidate_algorithms(cfg.collective), detail::channels_from_env());
  const auto pick = tuner::Tuner::best(priced);
  std::string text;
  for (const auto& c : priced) {
    if (!text.empty()) text += ", ";
    text += c.nchannels > 1 ? fmt::format("{}x{}", c.algorithm, c.nchannels) : c.algorithm;
    text += c.prediction.applicable ? fmt::format(" {:.1f}", c.prediction.seconds * 1e6) : std::string(" n/a");
  }
  // The choice the library makes for the actual call prices the count's power-of-two bucket.
  fmt::print("#   predicted (us): {} | pick {} | measured {:.1f} us ({})\n", text,
             pick.algorithm.empty() ? "none" : pick.algorithm, row.out_of_place.time_us,
             row.out_of_place.algo_used.empty() ? "?" : row.out_of_place.algo_used);
  std::fflush(stdout);
}

}  // namespace hoop::bench
