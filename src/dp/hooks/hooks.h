// The built-in communication hooks (see include/hoop/dp.h) and the pieces of their math that
// the tests check on their own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "hoop/dp.h"

namespace hoop::dp::hooks {

// "name:a:b:key=value": the name, the positional options, the key=value ones.
struct HookSpec {
  std::string name;
  std::vector<std::string> positional;
  std::map<std::string, std::string> options;
};
HookSpec parse_spec(const std::string& spec);
// A non-negative int option (throws invalid_argument naming the hook and the option).
int64_t int_option(const HookSpec& s, const std::string& key, int64_t fallback);
// Throws when the spec has options outside `known` or more than `max_positional` positional ones.
void check_options(const HookSpec& s, const std::vector<std::string>& known, size_t max_positional);

// Bucket values as f32 (a copy when the bucket holds bf16) and back.
void load_f32(float* dst, const void* src, DataType dt, size_t n);
void store_f32(void* dst, DataType dt, const float* src, size_t n);
// The plain average of n elements of dt over the ranks (nothing on one process).
void allreduce_avg(const CommHookContext& ctx, void* data, size_t n, DataType dt);

// bf16 / fp16 on the wire.
std::shared_ptr<CommHook> make_half_wire(DataType wire);

// PowerSGD.
struct PowerSgdOptions {
  int rank = 4;
  int warmup = 10;  // uncompressed steps first
};
std::shared_ptr<CommHook> make_powersgd(const PowerSgdOptions& o);
// Gram-Schmidt (each column orthogonalized twice) on the r columns of p (rows x r, row-major):
// orthonormal, in column order; a column with no norm left becomes zero.
void orthogonalize(float* p, size_t rows, size_t r);

// 1-bit with error feedback (1-bit Adam with Adam, warm-up > 0 and stage 0).
struct OneBitOptions {
  int warmup = 10;     // uncompressed steps first (with Adam: then the variance is frozen)
  size_t chunk = 256;  // elements per scale
  int refresh = 10;    // with Adam: first interval of the variance refresh (0: frozen for good)
};
std::shared_ptr<CommHook> make_onebit(const OneBitOptions& o);
// Chunks [offset, offset + len) of a bucket: `chunk` elements each, never across a tensor.
struct Chunk {
  size_t offset = 0, len = 0;
};
std::vector<Chunk> onebit_chunks(const GradBucket& b, size_t chunk);
size_t onebit_encoded_bytes(size_t numel, size_t nchunks);
// Encodes x (numel elements): per chunk its scale (mean |x|, f32), then one bit per element
// (1: negative), little-endian within each byte. `decoded` (may be null) gets what a receiver
// decodes: sign * scale.
void onebit_encode(const float* x, size_t numel, const std::vector<Chunk>& chunks,
                   std::byte* out, float* decoded);
// acc[i] (+)= the decoded value of element i; `first`: acc = instead of +=.
void onebit_decode(const std::byte* in, const std::vector<Chunk>& chunks, float* acc, bool first);
// A bucket's chunks cut into n runs of whole chunks (run q: the elements rank q reduces), each
// with its chunks' offsets relative to the run's first element.
struct OneBitGroup {
  size_t offset = 0, numel = 0;
  std::vector<Chunk> chunks;
};
std::vector<OneBitGroup> onebit_groups(const std::vector<Chunk>& chunks, size_t numel, size_t n);

}  // namespace hoop::dp::hooks
