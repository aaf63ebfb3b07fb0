// Rendezvous of a test's ranks through the test's store: await(key, count) blocks (up to a
// minute, then fails the test) until `count` ranks have called arrive(key).
#pragma once

#include <cstdint>
#include <string>

#include "hoop/store.h"

namespace hoop::test {

void arrive(Store& store, const std::string& key);
void await(Store& store, const std::string& key, int64_t count);

}  // namespace hoop::test
