// The 1-bit code: per chunk of elements its scale (mean |x|, f32), then one sign bit per
// element (1: negative), packed 8 per byte, little-endian within each byte. A receiver decodes
// sign * scale, so a chunk keeps its L1 norm.
#include <cmath>
#include <cstring>

#include "dp/hooks/hooks.h"

namespace hoop::dp::hooks {

std::vector<Chunk> onebit_chunks(const GradBucket& b, size_t chunk) {
  std::vector<Chunk> out;
  for (const BucketTensor& t : b.tensors) {
    for (size_t at = 0; at < t.numel; at += chunk) {
      out.push_back(Chunk{t.offset + at, std::min(chunk, t.numel - at)});
    }
  }
  return out;
}

size_t onebit_encoded_bytes(size_t numel, size_t nchunks) {
  return nchunks * sizeof(float) + (numel + 7) / 8;
}

namespace {

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

}  // namespace

void onebit_encode(const float* x, size_t numel, const std::vector<Chunk>& chunks,
                   std::byte* out, float* decoded) {
  auto* bits = reinterpret_cast<uint8_t*>(out + chunks.size() * sizeof(float));
  std::memset(bits, 0, (numel + 7) / 8);
  for (size_t c = 0; c < chunks.size(); ++c) {
    const Chunk& ch = chunks[c];
    double sum = 0;
    for (size_t i = ch.offset; i < ch.offset + ch.len; ++i) sum += std::fabs(x[i]);
    const float scale = static_cast<float>(sum / static_cast<double>(ch.len));
    std::memcpy(out + c * sizeof(float), &scale, sizeof(float));
    const uint32_t s = bits_of(scale);
    for (size_t i = ch.offset; i < ch.offset + ch.len; ++i) {
      const uint32_t neg = bits_of(x[i]) >> 31;
      bits[i / 8] = static_cast<uint8_t>(bits[i / 8] | (neg << (i % 8)));
      if (decoded) decoded[i] = float_of(s | (neg << 31));
    }
  }
}

void onebit_decode(const std::byte* in, const std::vector<Chunk>& chunks, float* acc, bool first) {
  const auto* bits = reinterpret_cast<const uint8_t*>(in + chunks.size() * sizeof(float));
  for (size_t c = 0; c < chunks.size(); ++c) {
    const Chunk& ch = chunks[c];
    uint32_t s;
    std::memcpy(&s, in + c * sizeof(float), sizeof s);
    float* a = acc + ch.offset;
    if (first) {
      for (size_t i = ch.offset; i < ch.offset + ch.len; ++i) {
        a[i - ch.offset] = float_of(s | (static_cast<uint32_t>((bits[i / 8] >> (i % 8)) & 1u) << 31));
      }
    } else {
      for (size_t i = ch.offset; i < ch.offset + ch.len; ++i) {
        a[i - ch.offset] += float_of(s | (static_cast<uint32_t>((bits[i / 8] >> (i % 8)) & 1u) << 31));
      }
    }
  }
}

std::vector<OneBitGroup> onebit_groups(const std::vector<Chunk>& chunks, size_t numel, size_t n) {
  std::vector<OneBitGroup> out(n);
  const size_t total = chunks.size();
  for (size_t q = 0; q < n; ++q) {
    OneBitGroup& g = out[q];
    const size_t from = q * total / n, to = (q + 1) * total / n;
    g.offset = from < total ? chunks[from].offset : numel;
    for (size_t c = from; c < to; ++c) {
      g.chunks.push_back(Chunk{chunks[c].offset - g.offset, chunks[c].len});
      g.numel += chunks[c].len;
    }
  }
  return out;
}

}  // namespace hoop::dp::hooks
