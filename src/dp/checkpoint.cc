// Sharded checkpoints. Every rank writes rank_<r>.bin: its image (dp/state_image.h), as
// little-endian f32. Rank 0 writes
// manifest.json (rank count, step, optimizer, tensors), from which any rank count can find
// where every element of every state lies, so a checkpoint of N ranks loads on M ranks at
// any stage. A communication hook's state (CommHook::state()) goes to hook_<r>.bin, its arrays
// back to back as f32, listed in the manifest.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "dp/data_parallel_impl.h"
#include "dp/optimizer.h"
#include "dp/state_image.h"

namespace hoop::dp::detail {

namespace {

constexpr int kFormatVersion = 1;

std::string rank_file(const std::string& dir, int r) {
  return dir + "/rank_" + std::to_string(r) + ".bin";
}

std::string hook_file(const std::string& dir, int r) {
  return dir + "/hook_" + std::to_string(r) + ".bin";
}

const char* kind_name(OptimizerKind k) {
  switch (k) {
    case OptimizerKind::sgd: return "sgd";
    case OptimizerKind::adam: return "adam";
    case OptimizerKind::adamw: return "adamw";
  }
  return "?";
}

// A checkpoint's rank files, read as the images they hold.
class FileStateSource final : public StateSource {
 public:
  FileStateSource(std::string dir, ImageLayout layout, int rank)
      : StateSource(std::move(layout)), dir_(std::move(dir)), rank_(rank),
        fds_(static_cast<size_t>(this->layout().ranks()), -1) {}
  ~FileStateSource() override {
    for (int fd : fds_) {
      if (fd >= 0) ::close(fd);
    }
  }
  FileStateSource(const FileStateSource&) = delete;
  FileStateSource& operator=(const FileStateSource&) = delete;

 private:
  void fetch(int q, size_t at, size_t count, float* dst) override {
    int& fd = fds_[static_cast<size_t>(q)];
    const std::string path = rank_file(dir_, q);
    ErrorContext c;
    c.rank = rank_;
    c.op = "dp.load";
    if (fd < 0) {
      fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) throw_system_error(ErrorCode::invalid_argument, "cannot open " + path, errno, c);
    }
    auto* p = reinterpret_cast<char*>(dst);
    size_t bytes = count * sizeof(float), off = at * sizeof(float);
    while (bytes > 0) {
      const ssize_t got = ::pread(fd, p, bytes, static_cast<off_t>(off));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) throw_system_error(ErrorCode::invalid_argument, "cannot read " + path, errno, c);
      if (got == 0) {
        throw_error(ErrorCode::invalid_argument,
                    fmt::format("{} is shorter than its manifest says (offset {})", path, off), c);
      }
      p += got;
      off += static_cast<size_t>(got);
      bytes -= static_cast<size_t>(got);
    }
  }

  std::string dir_;
  int rank_;
  std::vector<int> fds_;
};

}  // namespace

void DataParallelImpl::save(const std::string& dir) {
  HOOP_CHECK_ARG(finalized_, ctx("dp.save"), "call finalize() first");
  HOOP_CHECK_ARG(launched_.empty(), ctx("dp.save"), "save() between backward and step()");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const int nstates = optimizer_state_count(cfg_.optimizer);
  {
    const std::string path = rank_file(dir, rank_);
    std::vector<float> image(image_layout(nranks_).elements(rank_));
    write_image(image.data());
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!out) throw_error(ErrorCode::invalid_argument, "cannot write " + path, ctx("dp.save"));
    out.write(reinterpret_cast<const char*>(image.data()), static_cast<std::streamsize>(image.size() * sizeof(float)));
    out.flush();
    if (!out) throw_error(ErrorCode::invalid_argument, "cannot write " + path, ctx("dp.save"));
  }
  const std::vector<CommHookState> hook_state = hook_ ? hook_->state() : std::vector<CommHookState>{};
  if (!hook_state.empty()) {
    const std::string path = hook_file(dir, rank_);
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    for (const CommHookState& a : hook_state) {
      out.write(reinterpret_cast<const char*>(a.values->data()),
                static_cast<std::streamsize>(a.values->size() * sizeof(float)));
    }
    out.flush();
    if (!out) throw_error(ErrorCode::invalid_argument, "cannot write " + path, ctx("dp.save"));
  }
  if (rank_ == 0) {
    nlohmann::json m;
    m["format"] = "hoop-dp-checkpoint";
    m["version"] = kFormatVersion;
    m["world_size"] = nranks_;
    m["stage"] = cfg_.stage;
    m["precision"] = mixed_ ? "bf16" : "f32";
    m["step"] = steps_;
    const OptimizerConfig& o = cfg_.optimizer;
    m["optimizer"] = {{"kind", kind_name(o.kind)}, {"lr", o.lr},         {"beta1", o.beta1},
                      {"beta2", o.beta2},          {"eps", o.eps},       {"weight_decay", o.weight_decay},
                      {"momentum", o.momentum},    {"states", nstates}};
    m["layout"] = "rank_<r>.bin: per tensor, per state (params, then optimizer states), the "
                  "slice [r*ceil(n/N), min(n,(r+1)*ceil(n/N))) as f32";
    nlohmann::json tensors = nlohmann::json::array();
    for (const TensorSlot& s : layout_.tensors) {
      tensors.push_back({{"name", s.name}, {"numel", s.numel}, {"layer", s.layer}});
    }
    m["tensors"] = tensors;
    if (!hook_state.empty()) {
      nlohmann::json arrays = nlohmann::json::array();
      for (const CommHookState& a : hook_state) {
        arrays.push_back({{"name", a.name}, {"numel", a.values->size()}, {"replicated", a.replicated}});
      }
      m["hook"] = {{"name", hook_->name()}, {"arrays", arrays}};
    }
    const std::string path = dir + "/manifest.json";
    std::ofstream out(path, std::ios::trunc);
    out << m.dump(1) << "\n";
    if (!out) throw_error(ErrorCode::invalid_argument, "cannot write " + path, ctx("dp.save"));
  }
  if (comm_) comm_->barrier();  // the checkpoint is complete when save() returns anywhere
}

void DataParallelImpl::load(const std::string& dir) {
  HOOP_CHECK_ARG(finalized_, ctx("dp.load"), "call finalize() first");
  const std::string path = dir + "/manifest.json";
  std::ifstream in(path);
  if (!in) throw_error(ErrorCode::invalid_argument, "cannot open " + path, ctx("dp.load"));
  nlohmann::json m;
  try {
    in >> m;
  } catch (const std::exception& e) {
    throw_error(ErrorCode::invalid_argument, path + ": " + e.what(), ctx("dp.load"));
  }
  HOOP_CHECK_ARG(m.value("format", "") == "hoop-dp-checkpoint" &&
                     m.value("version", 0) == kFormatVersion,
                 ctx("dp.load"), "{} is not a hoop checkpoint of version {}", path, kFormatVersion);
  const int old_ranks = m.at("world_size").get<int>();
  const int nstates = optimizer_state_count(cfg_.optimizer);
  const int old_states = m.at("optimizer").at("states").get<int>();
  HOOP_CHECK_ARG(old_states == nstates, ctx("dp.load"),
                 "{} holds {} optimizer state array(s) ({}), this optimizer has {}", path,
                 old_states, m.at("optimizer").at("kind").get<std::string>(), nstates);
  const auto& tensors = m.at("tensors");
  HOOP_CHECK_ARG(tensors.size() == layout_.tensors.size(), ctx("dp.load"),
                 "{} has {} tensors, the model {}", path, tensors.size(), layout_.tensors.size());
  std::vector<size_t> numels;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorSlot& s = layout_.tensors[i];
    const auto name = tensors[i].at("name").get<std::string>();
    const auto n = tensors[i].at("numel").get<size_t>();
    HOOP_CHECK_ARG(name == s.name && n == s.numel, ctx("dp.load"),
                   "tensor {} is '{}' ({} elements) in {} but '{}' ({}) in the model", i, name, n,
                   path, s.name, s.numel);
    numels.push_back(n);
  }

  FileStateSource source(dir, image_layout(old_ranks), rank_);
  load_states(source);
  steps_ = m.at("step").get<uint64_t>();
  load_hook_state(dir, m, old_ranks);
  if (comm_) comm_->barrier();
}

ImageLayout DataParallelImpl::image_layout(int ranks) const {
  std::vector<size_t> numels;
  for (const TensorSlot& s : layout_.tensors) numels.push_back(s.numel);
  return ImageLayout(std::move(numels), ranks, 1 + optimizer_state_count(cfg_.optimizer));
}

void DataParallelImpl::write_image(float* dst) {
  const int nstates = optimizer_state_count(cfg_.optimizer);
  const float* states[2] = {state0_.as<float>(), state1_.as<float>()};
  for (size_t i = 0; i < layout_.tensors.size(); ++i) {
    const int t = static_cast<int>(i);
    const TensorSlot& s = layout_.tensors[i];
    const size_t v = s.valid(rank_);
    // Where this rank's slice starts in the arrays it holds (full at stage 0).
    const size_t skip = zero() ? 0 : s.begin(rank_);
    const size_t off = zero() ? s.shard_offset : flat(t);
    dst = std::copy_n(master_ptr(t) + skip, v, dst);
    for (int k = 0; k < nstates; ++k) dst = std::copy_n(states[k] + off + skip, v, dst);
  }
}

void DataParallelImpl::load_states(StateSource& source) {
  const int nstates = optimizer_state_count(cfg_.optimizer);
  float* states[2] = {state0_.as<float>(), state1_.as<float>()};
  std::vector<float> full;
  for (size_t i = 0; i < layout_.tensors.size(); ++i) {
    const int t = static_cast<int>(i);
    const TensorSlot& s = layout_.tensors[i];
    const size_t b = s.begin(rank_), v = s.valid(rank_);
    full.assign(s.numel, 0.0f);
    // Parameters: whole tensors where a rank holds them whole, else the rank's slice.
    if (cfg_.stage == 3) {
      source.read(i, 0, b, b + v, full.data() + b);
    } else {
      source.read(i, 0, 0, s.numel, full.data());
    }
    set_params_from_full(t, full.data());
    for (int k = 0; k < nstates; ++k) {
      if (zero()) {
        source.read(i, 1 + k, b, b + v, states[k] + s.shard_offset);
      } else {
        source.read(i, 1 + k, 0, s.numel, states[k] + flat(t));
      }
    }
  }
}

// The hook's arrays when the checkpoint holds the same hook's: all of them on the same rank
// count, the replicated ones (from rank 0's file) on another; the rest start at zero.
void DataParallelImpl::load_hook_state(const std::string& dir, const nlohmann::json& m,
                                       int old_ranks) {
  if (!hook_) return;
  std::vector<CommHookState> arrays = hook_->state();
  if (arrays.empty() || !m.contains("hook") || m["hook"].at("name") != hook_->name()) return;
  const auto& saved = m["hook"].at("arrays");
  HOOP_CHECK_ARG(saved.size() == arrays.size(), ctx("dp.load"),
                 "{}: the '{}' hook state has {} arrays, this model's {}", dir, hook_->name(),
                 saved.size(), arrays.size());
  const bool same_ranks = old_ranks == nranks_;
  const std::string path = hook_file(dir, same_ranks ? rank_ : 0);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_error(ErrorCode::invalid_argument, "cannot open " + path, ctx("dp.load"));
  for (size_t i = 0; i < arrays.size(); ++i) {
    CommHookState& a = arrays[i];
    const size_t n = saved[i].at("numel").get<size_t>();
    HOOP_CHECK_ARG(saved[i].at("name") == a.name && n == a.values->size(), ctx("dp.load"),
                   "{}: hook array {} is '{}' ({} elements), this model's '{}' ({})", dir, i,
                   saved[i].at("name").get<std::string>(), n, a.name, a.values->size());
    if (same_ranks || a.replicated) {
      in.read(reinterpret_cast<char*>(a.values->data()),
              static_cast<std::streamsize>(n * sizeof(float)));
    } else {
      in.seekg(static_cast<std::streamoff>(n * sizeof(float)), std::ios::cur);
      std::fill(a.values->begin(), a.values->end(), 0.0f);
    }
    if (!in) throw_error(ErrorCode::invalid_argument, path + " is shorter than its manifest says",
                         ctx("dp.load"));
  }
}

}  // namespace hoop::dp::detail
