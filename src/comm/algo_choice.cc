#include "comm/algo_choice.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "core/errors.h"
#include "core/log.h"
#include "core/params.h"
#include "schedule/schedule.h"

namespace hoop::detail {

namespace {

constexpr OpType kAllOps[] = {OpType::allreduce,  OpType::reducescatter, OpType::allgather, OpType::broadcast,
                              OpType::reduce,     OpType::barrier,       OpType::send,      OpType::recv,
                              OpType::alltoall,   OpType::alltoallv,     OpType::gather,    OpType::gatherv,
                              OpType::scatter,    OpType::scatterv,      OpType::allgatherv, OpType::reducescatterv};

struct AlgoEnv {
  std::string global;
  std::map<OpType, std::string> per_op;
};

bool registered_for(const std::string& name, OpType op) {
  const auto names = candidate_algorithms(op);
  return std::find(names.begin(), names.end(), name) != names.end();
}

AlgoEnv parse(const std::string& text) {
  AlgoEnv out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    const auto colon = item.find(':');
    if (colon == std::string::npos) {
      if (item != "auto") {
        const auto all = all_algorithm_names();
        if (std::find(all.begin(), all.end(), item) == all.end()) {
          throw_error(ErrorCode::invalid_argument,
                      fmt::format("HOOP_ALGO: unknown algorithm '{}' in '{}' (registered: {})", item, text,
                                  fmt::join(all, ", ")));
        }
      }
      out.global = item;
      continue;
    }
    const auto op = parse_optype(item.substr(0, colon));
    if (!op) {
      throw_error(ErrorCode::invalid_argument,
                  fmt::format("HOOP_ALGO: unknown collective '{}' in '{}'", item.substr(0, colon), text));
    }
    const std::string name = item.substr(colon + 1);
    if (name != "auto" && !registered_for(name, *op)) {
      throw_error(ErrorCode::invalid_argument,
                  fmt::format("HOOP_ALGO: unknown algorithm '{}' for {} in '{}' (registered for {}: {})", name,
                              to_string(*op), text, to_string(*op), fmt::join(candidate_algorithms(*op), ", ")));
    }
    out.per_op[*op] = name == "auto" ? "" : name;
  }
  return out;
}

std::string lookup(const AlgoEnv& env, OpType op) {
  if (auto it = env.per_op.find(op); it != env.per_op.end()) return it->second;
  if (env.global.empty() || env.global == "auto") return "";
  return registered_for(env.global, op) ? env.global : "";
}

}  // namespace

std::string algorithm_from_env(OpType op) {
  static const AlgoEnv env = parse(params::text_or(params::Id::algo, ""));
  return lookup(env, op);
}

std::string algorithm_from_text(const std::string& text, OpType op) { return lookup(parse(text), op); }

std::vector<std::string> candidate_algorithms(OpType op) { return schedule::algorithms_for(op); }

std::vector<std::string> all_algorithm_names() {
  std::set<std::string> all;
  for (OpType op : kAllOps) {
    for (auto& n : candidate_algorithms(op)) all.insert(n);
  }
  return {all.begin(), all.end()};
}

std::optional<int> channels_from_env() {
  // The registry accepts 1 to 16 only.
  static const std::optional<int> k = []() -> std::optional<int> {
    const auto v = params::integer_if_set(params::Id::nchannels);
    if (!v) return std::nullopt;
    return static_cast<int>(*v);
  }();
  return k;
}

}  // namespace hoop::detail
