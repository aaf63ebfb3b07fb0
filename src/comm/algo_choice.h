// HOOP_ALGO: forces an algorithm for every collective ("ring") or per collective
// ("allreduce:ring,reducescatter:ring"). A global name that a collective does not implement
// leaves that collective to the tuner. A name that no collective registers is an error that
// lists the registered ones. HOOP_NCHANNELS=K forces the channel count.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "hoop/types.h"

namespace hoop::detail {

// The algorithm HOOP_ALGO asks for `op`, or "" for the tuner's choice. Parsed once per
// process; throws hoop::Error{invalid_argument} (on every call) for a malformed value.
std::string algorithm_from_env(OpType op);
// The same for a given text (tests).
std::string algorithm_from_text(const std::string& text, OpType op);

// What the tuner chooses among for `op`: the registered algorithms (schedule::algorithms_for;
// the tuner prices as not applicable those that cannot run here, schedule::runs_here).
std::vector<std::string> candidate_algorithms(OpType op);
// Every registered name, over all collectives, sorted.
std::vector<std::string> all_algorithm_names();

// HOOP_NCHANNELS, when set (clamped to [1, 16]).
std::optional<int> channels_from_env();

}  // namespace hoop::detail
