// The one exception type hoop throws. It carries the context a user needs to find the
// culprit: which rank saw the error, during which operation (and its sequence number on the
// communicator), and which peer it was talking to or waiting on.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "hoop/export.h"

namespace hoop {

enum class HOOP_API ErrorCode {
  invalid_argument,  // bad buffer, count, root, dtype... refused before anything is sent
  timeout,           // a wait exceeded its timeout
  peer_failure,      // a peer died, closed its connection or reported its own failure
  mismatch,          // ranks called different collectives / counts / dtypes / roots
  aborted,           // abort() was called on the communicator
  revoked,           // a member called revoke(): the communicator takes no more operations
  transport,         // a socket or shared-memory error
  protocol,          // a malformed or foreign message or handshake
  init,              // bootstrap / rendezvous failed
  internal,
};

HOOP_API std::string_view to_string(ErrorCode code) noexcept;

struct ErrorContext {
  int rank = -1;       // the rank that raised the error (-1: unknown)
  std::string op;      // "allreduce", "store.get", ... (empty: none)
  uint64_t seq = 0;    // the op's sequence number on its communicator (0: none)
  int peer = -1;       // the peer rank involved (-1: none)
};

class HOOP_API Error : public std::runtime_error {
 public:
  // The message is prefixed with the context: "hoop rank 1: allreduce #5 (peer 2): <what>".
  Error(ErrorCode code, const std::string& what, ErrorContext ctx = {});
  // The same, naming the ranks found dead when the error was raised.
  Error(ErrorCode code, const std::string& what, ErrorContext ctx, std::vector<int> failed_ranks);

  ErrorCode code() const noexcept { return code_; }
  const ErrorContext& context() const noexcept { return ctx_; }
  int rank() const noexcept { return ctx_.rank; }
  int peer() const noexcept { return ctx_.peer; }
  uint64_t seq() const noexcept { return ctx_.seq; }
  const std::string& op() const noexcept { return ctx_.op; }
  // The message without the context prefix.
  const std::string& detail() const noexcept { return detail_; }
  // The ranks of the communicator known to have failed (their process is gone, or the peer the
  // error is about when it failed), in increasing order; empty when none is known. What a
  // survivor passes over to Communicator::shrink().
  const std::vector<int>& failed_ranks() const noexcept { return failed_ranks_; }

 private:
  ErrorCode code_;
  ErrorContext ctx_;
  std::string detail_;
  std::vector<int> failed_ranks_;
};

}  // namespace hoop
