// Which members are still there: the live members of a communicator settle through the store,
// within a deadline, on one list of the members that took part, each with a short value of its
// own (agree's vote). The store serialises the decision (the first proposal written wins), so
// every member that takes part reads the same list, whoever dies meanwhile; the links, which a
// failure may have broken, play no part. Used by Communicator::shrink and ::agree.
//
// Keys under `prefix`: v/<rank> (a member's value), n (arrivals), n/<i> (the i-th arrival
// happened), decided (the list). A member arrives by writing its value, then counting itself in.
// The members, each from the moment its arrival number allows (the first at once, the others
// staggered, in case it dies), propose once every member they do not know dead has arrived, or
// at the deadline with those that have.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "hoop/store.h"

namespace hoop::detail {

struct Survivor {
  int rank = -1;
  std::string value;
};

struct SurvivorQuery {
  Store* store = nullptr;
  std::string prefix;  // unique to this shrink or agreement of this communicator
  int rank = -1;
  int nranks = 0;
  std::chrono::milliseconds timeout{0};
  // The members certainly dead now (asked again while waiting).
  std::function<std::vector<int>()> dead;
  std::string op;  // "shrink", "agree": for errors
};

// Every member that took part, in rank order; throws Error{peer_failure} when the others
// decided without this rank, Error{timeout} when no decision came within the deadline and a
// grace period (the store then answers no one).
std::vector<Survivor> settle_survivors(const SurvivorQuery& q, const std::string& mine);

}  // namespace hoop::detail
