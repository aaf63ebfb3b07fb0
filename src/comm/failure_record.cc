#include "comm/failure_record.h"

#include <fmt/format.h>

namespace hoop::detail {

std::string first_failure_key(uint64_t comm_id) { return fmt::format("hoop/c{:x}/error", comm_id); }

std::optional<std::string> recorded_failure(Store& store, uint64_t comm_id) noexcept {
  try {
    const std::string key = first_failure_key(comm_id);
    if (!store.check(key)) return std::nullopt;
    const Bytes b = store.get(key);
    return std::string(b.begin(), b.end());
  } catch (...) {
    return std::nullopt;  // no store: nothing recorded to read
  }
}

}  // namespace hoop::detail
