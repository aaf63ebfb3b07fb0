#include "comm/algo_choice.h"

#include <map>
#include <sstream>

#include "core/env.h"
#include "core/errors.h"
#include "core/log.h"
#include "direct/direct_rule.h"
#include "schedule/schedule.h"

namespace hoop::detail {

namespace {

struct AlgoEnv {
  std::string global;
  std::map<OpType, std::string> per_op;
};

AlgoEnv parse(const std::string& text) {
  AlgoEnv out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    const auto colon = item.find(':');
    if (colon == std::string::npos) {
      out.global = item;
      continue;
    }
    const auto op = parse_optype(item.substr(0, colon));
    if (!op) {
      throw_error(ErrorCode::invalid_argument,
                  fmt::format("HOOP_ALGO: unknown collective '{}' in '{}'", item.substr(0, colon), text));
    }
    out.per_op[*op] = item.substr(colon + 1);
  }
  return out;
}

}  // namespace

std::string algorithm_from_env(OpType op) {
  static const AlgoEnv env = parse(env::get_or("HOOP_ALGO", ""));
  if (auto it = env.per_op.find(op); it != env.per_op.end()) return it->second;
  if (env.global.empty() || env.global == "auto") return "";
  if (env.global == direct::kAlgorithmName && direct::supports(op)) return env.global;
  for (const auto& name : schedule::algorithms_for(op)) {
    if (name == env.global) return env.global;
  }
  return "";
}

}  // namespace hoop::detail
