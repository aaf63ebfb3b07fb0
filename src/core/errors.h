// Helpers for raising hoop::Error with context.
#pragma once

#include <fmt/format.h>

#include "hoop/error.h"

namespace hoop {

[[noreturn]] void throw_error(ErrorCode code, const std::string& what, ErrorContext ctx = {});
// errno-based: appends ": <strerror(err)>".
[[noreturn]] void throw_system_error(ErrorCode code, const std::string& what, int err,
                                     ErrorContext ctx = {});

}  // namespace hoop

#define HOOP_CHECK_ARG(cond, ctx, ...)                                                \
  do {                                                                                \
    if (!(cond)) ::hoop::throw_error(::hoop::ErrorCode::invalid_argument,             \
                                     ::fmt::format(__VA_ARGS__), (ctx));              \
  } while (0)
