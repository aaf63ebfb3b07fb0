// Building the header this rank sends on a link for an operation, and checking the one it
// receives (or the call a peer announced in the shared region) against its own call, so a
// mismatched call is reported with both sides' values.
#pragma once

#include <cstdint>
#include <optional>

#include "engine/engine.h"
#include "transport/frame.h"
#include "transport/shm/region_layout.h"

namespace hoop::engine {

transport::FrameHeader make_header(const OpIdentity& id, uint64_t payload_bytes);

// The call as the peers of a shared region compare it.
transport::shm::CallSignature call_signature(const OpIdentity& id);
// Throws hoop::Error{mismatch}, naming both calls, when `theirs` (what `peer` called) is not the
// call that matches ours: the one report of a mismatch, for links and the shared region alike.
void check_same_call(const transport::shm::CallSignature& theirs, const OpIdentity& mine, int peer);
// The same for the call `peer` declared in the shared region (RegionPort::declared), when it
// is this operation's (same sequence and phase); nothing for another operation's or none.
void check_declared_call(const std::optional<transport::shm::CallSignature>& declared, const OpIdentity& mine,
                         int peer);

// Throws hoop::Error{protocol} for bytes that are not a header, hoop::Error{mismatch} when the
// peer's call differs from ours (op, sequence, dtype, op, count, root, payload size: the
// bytes this op moves on the link, unpadded, so that one element more or less is told).
// elem_bytes: the size of the elements moved (to name the sizes in elements too; 0: unknown).
void check_header(const transport::FrameHeader& got, const OpIdentity& mine, int peer,
                  uint64_t expected_payload, size_t elem_bytes = 0);

}  // namespace hoop::engine
