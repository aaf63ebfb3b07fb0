// Algorithm choice of a communicator: the per-op option, else HOOP_ALGO, else the tuner's
// pick among the registered algorithms; the cost model agreed at creation (calibration).
#include <fmt/format.h>

#include "comm/algo_choice.h"
#include "comm/comm_impl.h"
#include "tuner/calibration.h"

namespace hoop::detail {

namespace {

bool is_half_reduction(const OpTask& t) {
  const bool half = t.dtype == DataType::f16 || t.dtype == DataType::bf16;
  const bool reducing = t.desc.op == OpType::allreduce || t.desc.op == OpType::reducescatter ||
                        t.desc.op == OpType::reduce;
  return half && reducing;
}

// Call shapes whose choice is remembered; beyond, the memory starts over.
constexpr size_t kRememberedChoices = 4096;

}  // namespace

void CommImpl::calibrate(Communicator& self) {
  // Rank 0's partner for each link class: the first rank it reaches over that class.
  tuner::CalibrationPartners partners;
  for (int r = 1; r < size(); ++r) {
    const bool same_host = peers_[static_cast<size_t>(r)].host_id == peers_[0].host_id;
    const bool shm = transport_mode_ == "shm" || (transport_mode_ == "auto" && same_host);
    int& slot = shm ? partners.shm : partners.tcp;
    if (slot < 0) slot = r;
  }
  // Each creation on this store gets its own keys (every rank counts its own creations; all
  // ranks create communicators in the same order).
  const int64_t n = job_->store->add(fmt::format("hoop/tuner/created/{}", rank_), 1);
  const auto model = tuner::agree_on_model(self, *job_->store, fmt::format("hoop/tuner/{}/", n), partners,
                                           peers_[0].host_id);
  job_->cost_model = std::make_shared<const tuner::CostModel>(model);
  // The calibration's messages are not the user's traffic.
  reset_stats();
  {
    std::lock_guard lk(tuner_mu_);
    choices_.clear();  // made with the model before the calibration
  }
  std::lock_guard lk(mu_);
  last_algorithm_.clear();
}

tuner::Tuner& CommImpl::tuner() {
  std::lock_guard lk(tuner_mu_);
  if (!tuner_) {
    const auto force = transport_mode_ == "shm"   ? tuner::LinkView::Force::shm
                       : transport_mode_ == "tcp" ? tuner::LinkView::Force::tcp
                                                  : tuner::LinkView::Force::none;
    tuner_ = std::make_unique<tuner::Tuner>(job_->cost_model ? *job_->cost_model : tuner::CostModel{}, topology_,
                                            force);
  }
  return *tuner_;
}

CommImpl::AlgoChoice CommImpl::choose_algorithm(const OpTask& t) {
  const bool rooted = t.desc.op == OpType::broadcast || t.desc.op == OpType::reduce;
  ChoiceKey key{t.desc.op, t.dtype, t.desc.count, rooted ? t.desc.root : -1, t.opts.algo};
  {
    std::lock_guard lk(tuner_mu_);
    if (auto it = choices_.find(key); it != choices_.end()) return it->second;
  }
  AlgoChoice choice = work_out_algorithm(t);
  std::lock_guard lk(tuner_mu_);
  if (choices_.size() >= kRememberedChoices) choices_.clear();
  choices_.emplace(std::move(key), choice);
  return choice;
}

CommImpl::AlgoChoice CommImpl::work_out_algorithm(const OpTask& t) {
  const std::optional<int> forced_channels = channels_from_env();
  std::string name = t.opts.algo.empty() ? algorithm_from_env(t.desc.op) : t.opts.algo;
  if (name == "auto") name.clear();
  const auto candidates = candidate_algorithms(t.desc.op);
  // Nothing to choose (point-to-point, barrier, a single rank): no pricing.
  if (size() == 1 || (name.empty() && candidates.size() <= 1)) {
    return {name.empty() && !candidates.empty() ? candidates.front() : name, forced_channels.value_or(1)};
  }
  const size_t elem = is_half_reduction(t) ? sizeof(float) : dtype_size(t.dtype);
  if (!name.empty()) {
    // Forced algorithm: the tuner still picks its channel count (an unknown name is priced as
    // not applicable and fails when built, with the list of valid names).
    const auto c = tuner().choose(t.desc, elem, {name}, forced_channels);
    return {name, c.algorithm.empty() ? forced_channels.value_or(1) : c.nchannels};
  }
  const auto c = tuner().choose(t.desc, elem, candidates, forced_channels);
  if (c.algorithm.empty()) return {"", forced_channels.value_or(1)};
  return {c.algorithm, c.nchannels};
}

}  // namespace hoop::detail
