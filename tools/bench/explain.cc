#include "explain.h"

#include <fmt/format.h>

#include <memory>
#include <string>

#include "comm/algo_choice.h"
#include "comm/comm_access.h"
#include "core/op_traits.h"

namespace hoop::bench {

void print_explanation(Communicator& comm, const BenchConfig& cfg, const Layout& layout, const RowResult& row) {
  const std::string measured =
      fmt::format("measured {:.1f} us ({})", row.out_of_place.time.median,
                  row.out_of_place.algo_used.empty() ? "?" : row.out_of_place.algo_used);
  if (has_per_rank_count(cfg.collective)) {
    fmt::print("#   predicted: none (the tuner does not price {}, whose counts differ between ranks) | {}\n",
               to_string(cfg.collective), measured);
    std::fflush(stdout);
    return;
  }
  schedule::CollectiveDesc d;
  d.op = cfg.collective;
  d.count = layout.op_count;
  d.nranks = comm.size();
  d.root = cfg.root;
  d.redop = cfg.op;
  if (is_vector_op(cfg.collective)) {  // allgatherv, reducescatterv: the same blocks on every rank
    auto blocks = std::make_shared<schedule::BlockLayout>();
    (cfg.collective == OpType::allgatherv ? blocks->recv : blocks->send) = schedule::Blocks::packed(layout.blocks);
    d.count = layout.count;
    d.blocks = std::move(blocks);
  }
  const DataType elem_type = is_half_reduction(cfg.dtype, cfg.collective) ? DataType::f32 : cfg.dtype;
  const size_t elem = dtype_size(elem_type);
  auto& impl = detail::CommAccess::impl(comm);
  d.region = impl.region_shape(elem_type);
  auto& tuner = impl.tuner();
  const auto priced = tuner.price_all(d, elem, detail::candidate_algorithms(cfg.collective), detail::channels_from_env());
  const auto pick = tuner::Tuner::best(priced);
  std::string text;
  for (const auto& c : priced) {
    if (!text.empty()) text += ", ";
    text += c.nchannels > 1 ? fmt::format("{}x{}", c.algorithm, c.nchannels) : c.algorithm;
    text += c.prediction.applicable ? fmt::format(" {:.1f}", c.prediction.seconds * 1e6) : std::string(" n/a");
  }
  // The choice the library makes for the actual call prices the count's power-of-two bucket.
  fmt::print("#   predicted (us): {} | pick {} | {}\n", text, pick.algorithm.empty() ? "none" : pick.algorithm,
             measured);
  std::fflush(stdout);
}

}  // namespace hoop::bench
