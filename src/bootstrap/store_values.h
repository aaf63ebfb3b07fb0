// Value rules shared by the TCP store server and the file store, so that both stores give
// add and compare_set the same meaning.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "hoop/store.h"

namespace hoop::bootstrap {

// Strict decimal: optional '-', digits only, no spaces, within int64.
std::optional<int64_t> parse_decimal(std::string_view text);

// The new value of an add on `current` (nullptr: absent, counts as 0). False, with *error,
// when current is not a decimal integer or the sum overflows.
bool apply_add(const Bytes* current, int64_t delta, int64_t* result, std::string* error);

// compare_set matches when the key is absent and expected is empty, or when the stored value
// equals expected.
inline bool compare_set_matches(const Bytes* current, const Bytes& expected) {
  return current ? *current == expected : expected.empty();
}

Bytes to_bytes(std::string_view text);

}  // namespace hoop::bootstrap
