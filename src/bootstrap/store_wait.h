// Waiting for one key for a bounded time, whatever the store: hoop's TCP store parks the
// request at the server (one request per wait, nothing polled); any other store is checked,
// then slept on for a while.
#pragma once

#include <chrono>
#include <string>

#include "hoop/store.h"

namespace hoop::bootstrap {

// True once the key exists; false when `slice` passed first. A store that cannot park a wait
// is checked once and then slept on for `poll` (or the slice, if shorter).
bool key_set_within(Store& store, const std::string& key, std::chrono::milliseconds slice,
                    std::chrono::milliseconds poll = std::chrono::milliseconds(5));

// Whether key_set_within costs one request however long the slice: the store (or the store a
// prefix store wraps) parks waits at its server.
bool parks_waits(Store& store);

}  // namespace hoop::bootstrap
