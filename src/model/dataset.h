// Data sets for the MLP: the handwritten digits that python3-sklearn ships (8x8 images, read
// straight from its digits.csv.gz with zlib) and synthetic Gaussian clusters; a deterministic
// batch order shared by every rank.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace hoop::model {

struct Dataset {
  std::string name;
  int features = 0;
  int classes = 0;
  std::vector<float> x;  // size() x features, row-major
  std::vector<int> y;
  size_t size() const { return y.size(); }
  const float* row(size_t i) const { return x.data() + i * static_cast<size_t>(features); }
};

// Where Debian's python3-sklearn installs the digits; nullopt when absent.
std::optional<std::string> find_digits_file();
// 1797 rows of 64 pixels (0..16, scaled to 0..1) and the digit; throws hoop::Error.
Dataset load_digits(const std::string& csv_gz_path);
// `n` rows around `classes` random centres, Gaussian noise of `noise` (deterministic in seed).
Dataset make_synthetic(size_t n, int features, int classes, float noise, uint64_t seed);
// Shuffles (seed) and splits off the last `test_fraction` of the rows.
std::pair<Dataset, Dataset> split(const Dataset& all, double test_fraction, uint64_t seed);

// The rows of global batch `step` (batch rows): consecutive positions of an endless sequence
// of per-epoch shuffles of 0..n-1 (epoch e shuffled with seed + e).
std::vector<int> global_batch(size_t n, int batch, uint64_t step, uint64_t seed);
// The rows of that batch this rank takes: rows [r*B/N, (r+1)*B/N).
std::vector<int> rank_share(const std::vector<int>& batch, int rank, int ranks);
// Gathers rows into contiguous buffers.
void gather_rows(const Dataset& d, const std::vector<int>& rows, std::vector<float>& x,
                 std::vector<int>& y);

}  // namespace hoop::model
