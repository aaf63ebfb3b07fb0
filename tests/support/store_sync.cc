#include "support/store_sync.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace hoop::test {

void arrive(Store& store, const std::string& key) { store.add(key, 1); }

void await(Store& store, const std::string& key, int64_t count) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (store.add(key, 0) < count) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << key << " never reached " << count;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace hoop::test
