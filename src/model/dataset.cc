#include "model/dataset.h"

#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <numeric>
#include <random>
#include <sstream>

#include "core/errors.h"

namespace hoop::model {

std::optional<std::string> find_digits_file() {
  for (const char* p : {"/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz",
                        "/usr/share/python3-sklearn/datasets/data/digits.csv.gz"}) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(p, ec)) return std::string(p);
  }
  return std::nullopt;
}

namespace {

std::string read_gzip(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) throw_error(ErrorCode::invalid_argument, "cannot open " + path);
  std::string text;
  char buf[1 << 16];
  int got;
  while ((got = gzread(f, buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(got));
  int err = 0;
  const char* msg = gzerror(f, &err);
  const std::string why = msg ? msg : "";
  gzclose(f);
  if (got < 0 || (err != Z_OK && err != Z_STREAM_END)) {
    throw_error(ErrorCode::invalid_argument, "cannot decompress " + path + ": " + why);
  }
  return text;
}

}  // namespace

Dataset load_digits(const std::string& path) {
  const std::string text = read_gzip(path);
  Dataset d;
  d.name = "digits";
  d.features = 64;
  d.classes = 10;
  std::istringstream lines(text);
  std::string line;
  size_t lineno = 0;
  while (std::getline(lines, line)) {
    ++lineno;
    if (line.empty()) continue;
    std::vector<float> values;
    std::istringstream cells(line);
    std::string cell;
    while (std::getline(cells, cell, ',')) {
      try {
        values.push_back(std::stof(cell));
      } catch (const std::exception&) {
        throw_error(ErrorCode::invalid_argument,
                    fmt::format("{} line {}: '{}' is not a number", path, lineno, cell));
      }
    }
    if (values.size() != 65) {
      throw_error(ErrorCode::invalid_argument,
                  fmt::format("{} line {}: {} values, expected 64 pixels and a label", path,
                              lineno, values.size()));
    }
    for (int i = 0; i < 64; ++i) d.x.push_back(values[static_cast<size_t>(i)] / 16.0f);
    const int label = static_cast<int>(values[64]);
    if (label < 0 || label > 9) {
      throw_error(ErrorCode::invalid_argument,
                  fmt::format("{} line {}: label {} outside 0..9", path, lineno, label));
    }
    d.y.push_back(label);
  }
  if (d.y.empty()) throw_error(ErrorCode::invalid_argument, path + " holds no rows");
  return d;
}

Dataset make_synthetic(size_t n, int features, int classes, float noise, uint64_t seed) {
  HOOP_CHECK_ARG(n > 0 && features > 0 && classes > 1, ErrorContext{},
                 "synthetic data set of {} rows, {} features, {} classes", n, features, classes);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> centres(static_cast<size_t>(classes) * static_cast<size_t>(features));
  for (float& c : centres) c = normal(rng);
  Dataset d;
  d.name = "synthetic";
  d.features = features;
  d.classes = classes;
  d.x.resize(n * static_cast<size_t>(features));
  d.y.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const int label = static_cast<int>(rng() % static_cast<uint64_t>(classes));
    d.y[i] = label;
    for (int f = 0; f < features; ++f) {
      d.x[i * static_cast<size_t>(features) + static_cast<size_t>(f)] =
          centres[static_cast<size_t>(label) * static_cast<size_t>(features) + static_cast<size_t>(f)] +
          noise * normal(rng);
    }
  }
  return d;
}

std::pair<Dataset, Dataset> split(const Dataset& all, double test_fraction, uint64_t seed) {
  std::vector<int> order(all.size());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937_64(seed));
  const size_t ntest = static_cast<size_t>(static_cast<double>(all.size()) * test_fraction);
  Dataset train, test;
  for (Dataset* d : {&train, &test}) {
    d->name = all.name;
    d->features = all.features;
    d->classes = all.classes;
  }
  for (size_t i = 0; i < order.size(); ++i) {
    Dataset& d = i < order.size() - ntest ? train : test;
    const float* r = all.row(static_cast<size_t>(order[i]));
    d.x.insert(d.x.end(), r, r + all.features);
    d.y.push_back(all.y[static_cast<size_t>(order[i])]);
  }
  return {std::move(train), std::move(test)};
}

std::vector<int> global_batch(size_t n, int batch, uint64_t step, uint64_t seed) {
  std::vector<int> rows;
  rows.reserve(static_cast<size_t>(batch));
  std::vector<int> perm;
  uint64_t perm_epoch = ~uint64_t{0};
  for (uint64_t p = step * static_cast<uint64_t>(batch); rows.size() < static_cast<size_t>(batch);
       ++p) {
    const uint64_t epoch = p / n;
    if (epoch != perm_epoch) {
      perm.resize(n);
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), std::mt19937_64(seed + epoch));
      perm_epoch = epoch;
    }
    rows.push_back(perm[p % n]);
  }
  return rows;
}

std::vector<int> rank_share(const std::vector<int>& batch, int rank, int ranks) {
  const size_t b = batch.size();
  const size_t lo = b * static_cast<size_t>(rank) / static_cast<size_t>(ranks);
  const size_t hi = b * static_cast<size_t>(rank + 1) / static_cast<size_t>(ranks);
  return {batch.begin() + static_cast<long>(lo), batch.begin() + static_cast<long>(hi)};
}

void gather_rows(const Dataset& d, const std::vector<int>& rows, std::vector<float>& x,
                 std::vector<int>& y) {
  x.resize(rows.size() * static_cast<size_t>(d.features));
  y.resize(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    const float* r = d.row(static_cast<size_t>(rows[i]));
    std::copy(r, r + d.features, x.begin() + static_cast<long>(i) * d.features);
    y[i] = d.y[static_cast<size_t>(rows[i])];
  }
}

}  // namespace hoop::model
