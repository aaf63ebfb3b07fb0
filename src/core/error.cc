#include "hoop/error.h"

#include <fmt/format.h>

#include <cstring>

#include "core/errors.h"

namespace hoop {

std::string_view to_string(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::invalid_argument: return "invalid argument";
    case ErrorCode::timeout: return "timeout";
    case ErrorCode::peer_failure: return "peer failure";
    case ErrorCode::mismatch: return "mismatched call";
    case ErrorCode::aborted: return "aborted";
    case ErrorCode::revoked: return "revoked";
    case ErrorCode::transport: return "transport error";
    case ErrorCode::protocol: return "protocol error";
    case ErrorCode::init: return "initialization error";
    case ErrorCode::internal: return "internal error";
  }
  return "error";
}

namespace {
std::string format_message(const std::string& what, const ErrorContext& ctx) {
  std::string prefix = "hoop";
  if (ctx.rank >= 0) prefix += fmt::format(" rank {}", ctx.rank);
  prefix += ":";
  if (!ctx.op.empty()) {
    prefix += " " + ctx.op;
    if (ctx.seq != 0) prefix += fmt::format(" #{}", ctx.seq);
    if (ctx.peer >= 0) prefix += fmt::format(" (peer {})", ctx.peer);
    prefix += ":";
  } else if (ctx.peer >= 0) {
    prefix += fmt::format(" peer {}:", ctx.peer);
  }
  return prefix + " " + what;
}
}  // namespace

Error::Error(ErrorCode code, const std::string& what, ErrorContext ctx)
    : std::runtime_error(format_message(what, ctx)), code_(code), ctx_(std::move(ctx)), detail_(what) {}

Error::Error(ErrorCode code, const std::string& what, ErrorContext ctx, std::vector<int> failed_ranks)
    : Error(code, what, std::move(ctx)) {
  failed_ranks_ = std::move(failed_ranks);
}

void throw_error(ErrorCode code, const std::string& what, ErrorContext ctx) {
  throw Error(code, what, std::move(ctx));
}

void throw_system_error(ErrorCode code, const std::string& what, int err, ErrorContext ctx) {
  throw Error(code, fmt::format("{}: {}", what, std::strerror(err)), std::move(ctx));
}

}  // namespace hoop
