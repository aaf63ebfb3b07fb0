// What the built-in hooks share: the spec parser, the factory, f32 views of bucket values.
#include <algorithm>
#include <charconv>
#include <limits>

#include "core/errors.h"
#include "dp/hooks/hooks.h"
#include "kernels/reduce.h"

namespace hoop::dp {

void CommHook::reducescatter(const CommHookContext& ctx, ShardedGradBucket&) {
  throw_error(ErrorCode::invalid_argument,
              fmt::format("the '{}' communication hook does not support ZeRO stages 1 and 2", name()),
              ErrorContext{ctx.rank, "dp.hook"});
}

namespace hooks {

namespace {
ErrorContext hook_ctx() {
  ErrorContext c;
  c.op = "dp.compress";
  return c;
}
}  // namespace

HookSpec parse_spec(const std::string& spec) {
  HookSpec s;
  size_t begin = 0;
  bool first = true;
  while (begin <= spec.size()) {
    const size_t end = std::min(spec.find(':', begin), spec.size());
    const std::string part = spec.substr(begin, end - begin);
    if (first) {
      s.name = part;
      first = false;
    } else if (const size_t eq = part.find('='); eq != std::string::npos) {
      s.options[part.substr(0, eq)] = part.substr(eq + 1);
    } else {
      s.positional.push_back(part);
    }
    begin = end + 1;
  }
  return s;
}

int64_t int_option(const HookSpec& s, const std::string& key, int64_t fallback) {
  const auto it = s.options.find(key);
  if (it == s.options.end()) return fallback;
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(it->second.data(), it->second.data() + it->second.size(), v);
  HOOP_CHECK_ARG(ec == std::errc() && end == it->second.data() + it->second.size() && v >= 0 &&
                     v <= std::numeric_limits<int>::max(),
                 hook_ctx(), "compress '{}': {}={} is not a non-negative integer", s.name, key,
                 it->second);
  return v;
}

void check_options(const HookSpec& s, const std::vector<std::string>& known, size_t max_positional) {
  HOOP_CHECK_ARG(s.positional.size() <= max_positional, hook_ctx(),
                 "compress '{}': too many options", s.name);
  for (const auto& [key, value] : s.options) {
    HOOP_CHECK_ARG(std::find(known.begin(), known.end(), key) != known.end(), hook_ctx(),
                   "compress '{}': unknown option '{}'", s.name, key);
  }
}

void load_f32(float* dst, const void* src, DataType dt, size_t n) { kernels::to_f32(dst, src, dt, n); }

void store_f32(void* dst, DataType dt, const float* src, size_t n) {
  kernels::from_f32(dst, dt, src, n);
}

void allreduce_avg(const CommHookContext& ctx, void* data, size_t n, DataType dt) {
  if (ctx.comm && n > 0) ctx.comm->allreduce(data, data, n, dt, RedOp::avg, ctx.op_options);
}

}  // namespace hooks

std::shared_ptr<CommHook> make_comm_hook(const std::string& spec) {
  const hooks::HookSpec s = hooks::parse_spec(spec);
  if (s.name == "none" || s.name == "bf16" || s.name == "fp16") {
    hooks::check_options(s, {}, 0);
    if (s.name == "none") return nullptr;
    return hooks::make_half_wire(s.name == "bf16" ? DataType::bf16 : DataType::f16);
  }
  if (s.name == "powersgd") {
    hooks::check_options(s, {"warmup"}, 1);
    hooks::PowerSgdOptions o;
    if (!s.positional.empty()) {
      const std::string& r = s.positional[0];
      int v = 0;
      const auto [end, ec] = std::from_chars(r.data(), r.data() + r.size(), v);
      HOOP_CHECK_ARG(ec == std::errc() && end == r.data() + r.size() && v > 0, hooks::hook_ctx(),
                     "compress 'powersgd:{}': the rank must be a positive integer", r);
      o.rank = v;
    }
    o.warmup = static_cast<int>(hooks::int_option(s, "warmup", o.warmup));
    return hooks::make_powersgd(o);
  }
  if (s.name == "onebit") {
    hooks::check_options(s, {"warmup", "chunk", "refresh"}, 0);
    hooks::OneBitOptions o;
    o.warmup = static_cast<int>(hooks::int_option(s, "warmup", o.warmup));
    o.chunk = static_cast<size_t>(hooks::int_option(s, "chunk", static_cast<int64_t>(o.chunk)));
    o.refresh = static_cast<int>(hooks::int_option(s, "refresh", o.warmup));
    HOOP_CHECK_ARG(o.chunk > 0, hooks::hook_ctx(), "compress 'onebit': chunk must be positive");
    return hooks::make_onebit(o);
  }
  throw_error(ErrorCode::invalid_argument,
              fmt::format("unknown communication hook '{}' (none, bf16, fp16, powersgd[:r], onebit)",
                          spec),
              hooks::hook_ctx());
}

}  // namespace hoop::dp
