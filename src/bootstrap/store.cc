#include "hoop/store.h"

namespace hoop {

void Store::set_string(const std::string& key, const std::string& value) {
  set(key, Bytes(value.begin(), value.end()));
}

std::string Store::get_string(const std::string& key) {
  Bytes value = get(key);
  return std::string(value.begin(), value.end());
}

}  // namespace hoop
