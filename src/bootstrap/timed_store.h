// Stores whose blocking calls take their timeout as an argument, so that a wrapper (a prefix
// store) can apply its own timeout() to the store it wraps.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "hoop/store.h"

namespace hoop::bootstrap {

class TimedStore : public Store {
 public:
  Bytes get(const std::string& key) final { return get_within(key, timeout()); }
  void wait(const std::vector<std::string>& keys) final { wait_within(keys, timeout()); }

  virtual Bytes get_within(const std::string& key, std::chrono::milliseconds limit) = 0;
  virtual void wait_within(const std::vector<std::string>& keys,
                           std::chrono::milliseconds limit) = 0;
  // Whether a wait is parked at a server (one request, however long) rather than polled.
  virtual bool parks_waits() const { return false; }
};

}  // namespace hoop::bootstrap
