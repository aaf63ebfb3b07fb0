#include "bootstrap/store_wait.h"

#include <algorithm>
#include <thread>

#include "bootstrap/timed_store.h"
#include "hoop/error.h"

namespace hoop::bootstrap {

bool parks_waits(Store& store) {
  const auto* timed = dynamic_cast<const TimedStore*>(&store);
  return timed && timed->parks_waits();
}

bool key_set_within(Store& store, const std::string& key, std::chrono::milliseconds slice,
                    std::chrono::milliseconds poll) {
  auto* timed = dynamic_cast<TimedStore*>(&store);
  if (timed && timed->parks_waits()) {
    try {
      timed->wait_within({key}, slice);
      return true;
    } catch (const Error& e) {
      if (e.code() != ErrorCode::timeout) throw;
      return false;
    }
  }
  if (store.check(key)) return true;
  std::this_thread::sleep_for(std::min(slice, poll));
  return store.check(key);
}

}  // namespace hoop::bootstrap
