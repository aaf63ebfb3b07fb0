// Checkpoints of an elastic run: checkpoint_dir/step-<n> holds the sharded checkpoint of step n,
// checkpoint_dir/latest names the newest one that every rank finished writing.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "hoop/communicator.h"
#include "hoop/dp.h"

namespace hoop::train::elastic {

// The directory of the newest complete checkpoint, if any.
std::optional<std::string> latest_checkpoint(const std::string& checkpoint_dir);

// Saves step `step` (collective over comm's ranks), then, once every rank is done, points
// "latest" at it (rank 0, by an atomic rename), so a crash in between leaves the previous one.
void save_checkpoint(dp::DataParallel& dp, Communicator* comm, const std::string& checkpoint_dir,
                     uint64_t step);

}  // namespace hoop::train::elastic
