// The inside of a Communicator, for hoop's own code and for the tools and tests built on the
// internal library (hoop_internal): the public API has no way to it.
#pragma once

#include "comm/comm_impl.h"
#include "hoop/communicator.h"

namespace hoop::detail {

struct CommAccess {
  static CommImpl& impl(Communicator& c) { return *c.impl_; }
};

}  // namespace hoop::detail
