// libFuzzer target for the store's wire parsers (built apart from the library, by its name):
//   clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -Iinclude -Isrc
//     src/bootstrap/fuzz_store_protocol.cc src/bootstrap/store_protocol.cc -lfmt
// Properties: no crash or over-read on any input; a complete parse consumes no more than the
// input, and re-encoding what was parsed gives back exactly the bytes consumed; a malformed
// verdict explains itself.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "bootstrap/store_protocol.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hoop::bootstrap;
  {
    StoreRequest req;
    size_t consumed = 0;
    std::string error;
    ParseStatus st = parse_store_request(data, size, &req, &consumed, &error);
    if (st == ParseStatus::complete) {
      check(consumed > 0 && consumed <= size);
      std::vector<uint8_t> again = encode_store_request(req);
      check(again.size() == consumed && std::memcmp(again.data(), data, consumed) == 0);
      // Every prefix of a complete request is incomplete, never malformed.
      StoreRequest part;
      size_t part_consumed = 0;
      check(parse_store_request(data, consumed - 1, &part, &part_consumed, &error) ==
            ParseStatus::need_more);
    } else if (st == ParseStatus::malformed) {
      check(!error.empty());
    }
  }
  {
    StoreResponse resp;
    size_t consumed = 0;
    std::string error;
    ParseStatus st = parse_store_response(data, size, &resp, &consumed, &error);
    if (st == ParseStatus::complete) {
      check(consumed > 0 && consumed <= size);
      std::vector<uint8_t> again;
      encode_store_response(resp, &again);
      check(again.size() == consumed && std::memcmp(again.data(), data, consumed) == 0);
    } else if (st == ParseStatus::malformed) {
      check(!error.empty());
    }
  }
  return 0;
}
