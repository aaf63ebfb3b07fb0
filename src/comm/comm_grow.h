// Growing a communicator (NCCL's ncclCommGrow): newcomers take a ticket in the job's store and
// publish their record; the members of a communicator take the next k tickets, wait for those
// records, and tell each newcomer its place: the new communicator's id, its rank and every
// member's record, the members' cost model, the transport and the timeout.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/comm_impl.h"

namespace hoop::detail {

std::string grow_newcomer_key(int64_t ticket);  // a newcomer's record
std::string grow_placed_key(int64_t ticket);    // where it goes
inline constexpr const char* kGrowTickets = "hoop/grow/newcomers";  // tickets handed out
inline constexpr const char* kGrowTaken = "hoop/grow/taken";        // tickets taken by members

struct GrowPlacement {
  uint64_t comm_id = 0;
  int rank = -1;
  std::vector<PeerInfo> peers;
  std::string cost_model;  // tuner::to_json; empty: the defaults
  std::string transport;
  std::chrono::milliseconds timeout{0};
};

std::string encode_placement(const GrowPlacement& p);
GrowPlacement decode_placement(const std::string& text);

}  // namespace hoop::detail
