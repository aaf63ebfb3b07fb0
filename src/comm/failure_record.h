// The first failure of a communicator, recorded in the store by the rank that met it, so that
// every rank can name it, and so that a rank waiting on a peer that failed before it ever
// linked to this one (no link to poison) can learn of it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "hoop/store.h"

namespace hoop::detail {

std::string first_failure_key(uint64_t comm_id);
// The record, if any; nothing when the store cannot be reached.
std::optional<std::string> recorded_failure(Store& store, uint64_t comm_id) noexcept;

}  // namespace hoop::detail
