// Algorithm choice of a communicator: the per-op option, else HOOP_ALGO, else the tuner's
// pick among the registered algorithms; the cost model agreed at creation (calibration).
#include <fmt/format.h>

#include <chrono>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "comm/algo_choice.h"
#include "comm/comm_impl.h"
#include "comm/link_params.h"
#include "comm/p2p_engine.h"
#include "core/op_traits.h"
#include "core/params.h"
#include "transport/tcp/socket_options.h"
#include "tuner/calibration.h"

namespace hoop::detail {

namespace {

// Call shapes whose choice is remembered; beyond, the memory starts over.
constexpr size_t kRememberedChoices = 4096;
// How long a wait spins before it sleeps while the calibration times a TCP link.
constexpr std::chrono::microseconds kLinkTimingSpin{5000};
// The spin of ranks that do not outnumber the cores (HOOP_SPIN_US, else its default): the
// calibration's pinned pair spins that long whatever the job's size.
std::chrono::microseconds uncontended_spin() {
  return std::chrono::microseconds(params::integer(params::Id::spin_us));
}

// CalibrationPartners::hosts_share_one_machine, the same on every rank (from the peer table).
bool hosts_share_one_machine(const std::vector<PeerInfo>& peers) {
  std::set<std::string> hosts;
  for (const PeerInfo& p : peers) {
    if (p.machine_id != peers[0].machine_id || !hosts.insert(p.host_id).second) return false;
  }
  return peers.size() > 1;
}

}  // namespace

void CommImpl::calibrate(Communicator& self) {
  // Rank 0's partner for each link class: the first rank it reaches over that class.
  tuner::CalibrationPartners partners;
  const LinkTarget rank0{*job_, comm_id_, 0, peers_, transport_mode_};
  for (int r = 1; r < size(); ++r) {
    int& slot = rank0.selected(r).kind == TransportKind::shm ? partners.shm : partners.tcp;
    if (slot < 0) slot = r;
  }
  partners.tcp_same_machine = partners.tcp >= 0 && peers_[static_cast<size_t>(partners.tcp)].machine_id == peers_[0].machine_id;
  partners.tcp_loopback = partners.tcp >= 0 && peers_[static_cast<size_t>(partners.tcp)].host_id == peers_[0].host_id;
  partners.hosts_share_one_machine = hosts_share_one_machine(peers_);
  // Each creation on this store gets its own keys (every rank counts its own creations; all
  // ranks create communicators in the same order).
  const int64_t n = job_->store->add(fmt::format("hoop/tuner/created/{}", rank_), 1);
  const auto model = tuner::agree_on_model(self, *job_->store, fmt::format("hoop/tuner/{}/", n), partners,
                                           peers_[0].host_id, [this](tuner::TimingWait w) {
                                             using W = tuner::TimingWait;
                                             p2p_->set_spin_floor(w == W::spin   ? kLinkTimingSpin
                                                                  : w == W::hold ? uncontended_spin()
                                                                                 : std::chrono::microseconds(0));
                                             p2p_->set_spin_holds_core(w == W::hold);
                                           });
  job_->cost_model = std::make_shared<const tuner::CostModel>(model);
  // Over a shaped link, send and receive buffers of 2 ms at its sustained rate
  // (shaped_link_window), unless the user set the buffer.
  if (params::origin(params::Id::socket_buffer) == params::Origin::default_value)
    transport::tcp::cap_link_buffers(tuner::shaped_link_window(model));
  // The calibration's messages are not the user's traffic.
  reset_stats();
  {
    std::lock_guard lk(tuner_mu_);
    // Made with the model before the calibration (its own calls, the fit's AllReduces, may
    // have created the tuner).
    choices_.clear();
    tuner_.reset();
  }
  // shm-direct's shape follows the model (its single-copy thresholds): cut again.
  region_shapes_.clear();
  schedules_.clear();
  cached_actions_ = 0;
  last_call_.valid = false;
  std::lock_guard lk(mu_);
  last_algorithm_.clear();
}

tuner::Tuner& CommImpl::tuner() {
  std::lock_guard lk(tuner_mu_);
  if (!tuner_) {
    const Transport* forced = forced_transport(transport_mode_);
    const auto force = !forced                              ? tuner::LinkView::Force::none
                       : forced->kind == TransportKind::shm ? tuner::LinkView::Force::shm
                                                            : tuner::LinkView::Force::tcp;
    tuner_ = std::make_unique<tuner::Tuner>(job_->cost_model ? *job_->cost_model : tuner::CostModel{}, topology_,
                                            force);
    // Ranks of one machine share its cores, whatever host they claim to be (a lab's hosts).
    std::map<std::string, int> machine_index;
    std::vector<int> machine_of_rank;
    for (const auto& p : peers_) {
      machine_of_rank.push_back(machine_index.emplace(p.machine_id, static_cast<int>(machine_index.size())).first->second);
    }
    tuner_->set_machines(std::move(machine_of_rank));
  }
  return *tuner_;
}

CommImpl::AlgoChoice CommImpl::choose_algorithm(const OpTask& t) {
  const bool rooted = has_root(t.desc.op);
  ChoiceKey key{t.desc.op, t.dtype, t.desc.count, rooted ? t.desc.root : -1, t.desc.registered, t.opts.algo};
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
  // Nothing to choose (point-to-point, barrier, a single rank), or nothing every rank could
  // price alike (a v-form whose counts each rank knows only for itself): no pricing.
  if (size() == 1 || has_per_rank_count(t.desc.op) || (name.empty() && candidates.size() <= 1)) {
    return {name.empty() && !candidates.empty() ? candidates.front() : name, forced_channels.value_or(1)};
  }
  const size_t elem = is_half_reduction(t.dtype, t.desc.op) ? sizeof(float) : dtype_size(t.dtype);
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
