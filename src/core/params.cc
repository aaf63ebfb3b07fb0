// Checked reads of the variables declared in params_table.cc. Every read looks at the
// environment again (nothing is cached here): callers that want one value per process keep it.
#include "core/params.h"

#include <cerrno>
#include <cmath>
#include <cctype>
#include <cstdlib>

#include "core/env.h"
#include "core/errors.h"
#include "core/log.h"

namespace hoop::params {

namespace {

bool same(std::string_view a, std::string_view b, bool fold_case) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const auto x = static_cast<unsigned char>(a[i]), y = static_cast<unsigned char>(b[i]);
    if (fold_case ? std::toupper(x) != std::toupper(y) : x != y) return false;
  }
  return true;
}

// Whether `value` is one of the '|'-separated `list`.
bool listed(std::string_view list, std::string_view value, bool fold_case) {
  while (!list.empty()) {
    const size_t bar = list.find('|');
    if (same(list.substr(0, bar), value, fold_case)) return true;
    if (bar == std::string_view::npos) break;
    list.remove_prefix(bar + 1);
  }
  return false;
}

std::optional<std::chrono::milliseconds> parse_seconds(const std::string& text) {
  errno = 0;
  char* end = nullptr;
  const double s = std::strtod(text.c_str(), &end);
  if (errno != 0 || end == text.c_str() || *end != '\0' || !std::isfinite(s) || s < 0) return std::nullopt;
  return std::chrono::milliseconds(static_cast<int64_t>(std::llround(s * 1000.0)));
}

// 1099511627776 as "1T", 65536 as "64K": sizes as the variables spell them.
std::string size_text(int64_t bytes) {
  constexpr std::string_view kUnits = "KMGT";
  std::string unit;
  for (size_t i = 0; i < kUnits.size() && bytes >= 1024 && bytes % 1024 == 0; ++i) {
    bytes /= 1024;
    unit = kUnits[i];
  }
  return fmt::format("{}{}", bytes, unit);
}

bool in_range(const Param& p, int64_t v) { return v >= p.min && v <= p.max; }
bool in_range(const Param& p, uint64_t v) {
  return v >= static_cast<uint64_t>(p.min) && v <= static_cast<uint64_t>(p.max);
}

// The environment's value when it is accepted; nullopt when unset, or when it is not accepted
// and the variable falls back to its default.
std::optional<std::string> checked(Id id) {
  auto v = raw(id);
  if (!v) return std::nullopt;
  auto why = problem(id);
  if (!why) return v;
  switch (param(id).on_bad) {
    case OnBad::error: throw_error(ErrorCode::invalid_argument, *why);
    case OnBad::warn: HOOP_WARN("{}; using the default", *why); break;
    case OnBad::quiet: break;
  }
  return std::nullopt;
}

// The environment's accepted value, else the declared default.
std::string value_or_default(Id id) {
  if (auto v = checked(id)) return *v;
  const Param& p = param(id);
  if (p.fallback.empty()) {
    throw_error(ErrorCode::internal, fmt::format("{} has no default to read", p.name));
  }
  return std::string(p.fallback);
}

}  // namespace

const Param& param(Id id) noexcept { return all()[static_cast<size_t>(id)]; }

const Param* find(std::string_view name) noexcept {
  for (const Param& p : all()) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

std::optional<std::string> raw(Id id) { return env::get(std::string(param(id).name).c_str()); }

std::optional<std::string> raw(std::string_view name) {
  if (name.starts_with("HOOP_") && !find(name)) {
    throw_error(ErrorCode::internal, fmt::format("{} is not declared in src/core/params_table.cc", name));
  }
  return env::get(std::string(name).c_str());
}

Origin origin(Id id) {
  if (!raw(id)) return Origin::default_value;
  return param(id).launcher ? Origin::launcher : Origin::environment;
}

std::string_view to_string(Origin o) noexcept {
  switch (o) {
    case Origin::default_value: return "default";
    case Origin::environment: return "environment";
    case Origin::launcher: return "launcher";
  }
  return "?";
}

std::optional<std::string> problem(Id id) {
  const auto v = raw(id);
  if (!v) return std::nullopt;
  const Param& p = param(id);
  bool ok = true;
  switch (p.kind) {
    case Kind::text: break;
    case Kind::integer: {
      const auto x = env::parse_int(*v);
      ok = x && in_range(p, *x);
      break;
    }
    case Kind::size: {
      const auto x = env::parse_size(*v);
      ok = x && in_range(p, *x);
      break;
    }
    case Kind::seconds: ok = parse_seconds(*v).has_value(); break;
    case Kind::choice: ok = listed(p.choices, *v, p.fold_case) || listed(p.aliases, *v, p.fold_case); break;
  }
  if (ok) return std::nullopt;
  return fmt::format("environment variable {}='{}' is not accepted: {} takes {}", p.name, *v, p.name,
                     accepted(p));
}

std::string accepted(const Param& p) {
  constexpr int64_t kNoMax = std::numeric_limits<int64_t>::max();
  switch (p.kind) {
    case Kind::text: return "any text";
    case Kind::integer:
      if (p.max == kNoMax) return fmt::format("an integer of at least {}", p.min);
      return fmt::format("an integer from {} to {}", p.min, p.max);
    case Kind::size: {
      std::string s = "a size in bytes such as 4096, 64K, 4M or 1G";
      if (p.min > 0) s += fmt::format(", at least {}", size_text(p.min));
      if (p.max != kNoMax) s += fmt::format(", at most {}", size_text(p.max));
      return s;
    }
    case Kind::seconds: return "a number of seconds of at least 0 (fractions allowed: 0.5)";
    case Kind::choice: return fmt::format("one of {}", p.choices);
  }
  return {};
}

std::string describe(Id id) {
  const Param& p = param(id);
  const auto v = raw(id);
  std::string shown = v ? *v : (p.fallback.empty() ? "(unset)" : std::string(p.fallback));
  if (v && p.hidden) shown = "(hidden)";
  std::string line = fmt::format("{:<40} {:<16} {}", p.name, shown, to_string(origin(id)));
  if (auto why = problem(id)) line += fmt::format(" (not accepted: {} takes {})", p.name, accepted(p));
  return line;
}

std::optional<std::string> text(Id id) {
  if (auto v = checked(id)) return v;
  const Param& p = param(id);
  if (p.fallback.empty()) return std::nullopt;
  return std::string(p.fallback);
}

std::string text_or(Id id, std::string_view when_unset) {
  auto v = text(id);
  return v ? *v : std::string(when_unset);
}

int64_t integer(Id id) { return *env::parse_int(value_or_default(id)); }

std::optional<int64_t> integer_if_set(Id id) {
  auto v = checked(id);
  if (!v) return std::nullopt;
  return env::parse_int(*v);
}

uint64_t bytes(Id id) { return *env::parse_size(value_or_default(id)); }

std::chrono::milliseconds seconds(Id id) { return *parse_seconds(value_or_default(id)); }

}  // namespace hoop::params
