// Selection: among the algorithms registered for a collective (shm-direct's included: priced by
// walking its schedules like the others), the one with the smallest predicted time, and its
// channel count.
// Choices are cached per (op, element size, power-of-two count bucket, nranks, root == 0):
// every rank holds the same model and sees the same calls in the same order, so every rank
// makes the same choice.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "tuner/cost_model.h"
#include "tuner/predict.h"
#include "tuner/pricing.h"

namespace hoop::tuner {

struct Candidate {
  std::string algorithm;
  int nchannels = 1;
  Prediction prediction;
};

struct Choice {
  std::string algorithm;  // empty: nothing applicable (the caller falls back to its default)
  int nchannels = 1;
  double predicted_seconds = 0;
};

// The count the tuner prices for a call of `count` elements: the lower power of two (0 for 0).
size_t count_bucket_representative(size_t count);

class Tuner {
 public:
  // `topology` is copied; `force` as in LinkView.
  Tuner(CostModel model, schedule::Topology topology, LinkView::Force force);

  const CostModel& model() const { return model_; }
  LinkView links() const { return LinkView{&topology_, force_, &machines_}; }
  // Which machine each rank runs on (LinkView::machine_of_rank); unset: one per host.
  void set_machines(std::vector<int> machine_of_rank) { machines_ = std::move(machine_of_rank); }
  const schedule::Topology& topology() const { return topology_; }
  // How candidates are priced (pricing.h): the sampled walk unless told otherwise (hoop-sim).
  void set_pricing(Pricing how) { pricing_ = how; }

  // Every (algorithm, channels) priced for desc as given (its count is used as is), in the
  // order of `names`, then channels. forced_channels: only that channel count.
  std::vector<Candidate> price_all(const schedule::CollectiveDesc& desc, size_t elem_bytes,
                                   const std::vector<std::string>& names,
                                   std::optional<int> forced_channels = std::nullopt) const;
  // The fastest of price_all; ties go to the earlier one, except that the ring (its best
  // channel count) wins over halving-doubling or recursive doubling when it is predicted within
  // kExchangeTieMargin of them.
  static Choice best(const std::vector<Candidate>& priced);
  static constexpr double kExchangeTieMargin = 0.05;

  // Cached choice for a call (its count bucketed).
  Choice choose(const schedule::CollectiveDesc& desc, size_t elem_bytes, const std::vector<std::string>& names,
                std::optional<int> forced_channels = std::nullopt);

 private:
  CostModel model_;
  schedule::Topology topology_;
  std::vector<int> machines_;
  LinkView::Force force_;
  Pricing pricing_ = Pricing::sampled_walk;
  std::mutex mu_;
  std::map<std::tuple<int, size_t, size_t, int, bool, bool, int, std::string>, Choice> cache_;
};

}  // namespace hoop::tuner
