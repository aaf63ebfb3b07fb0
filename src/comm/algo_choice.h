// HOOP_ALGO: forces an algorithm for every collective ("ring") or per collective
// ("allreduce:ring,reducescatter:ring"). A global name that a collective does not implement
// leaves that collective on its default.
#pragma once

#include <string>

#include "hoop/types.h"

namespace hoop::detail {

// The algorithm HOOP_ALGO asks for `op`, or "" for the default. Parsed once per process.
std::string algorithm_from_env(OpType op);

}  // namespace hoop::detail
