// Errors of the store client that callers may treat apart.
#pragma once

#include "hoop/error.h"

namespace hoop::bootstrap {

// The store server closed or reset the connection of a request (it died or restarted), as
// opposed to not answering in time. A peer_failure like any lost store; a caller whose
// requests may be repeated (init) catches it to try again on a new connection, which the
// client makes with its connection retry budget.
struct StoreConnectionBroken : Error {
  using Error::Error;
};

}  // namespace hoop::bootstrap
