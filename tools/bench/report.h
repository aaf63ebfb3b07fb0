// hoop-bench's output, on rank 0: the nccl-tests style table on stdout, one section per
// algorithm, and the same rows in CSV and JSON files when asked.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_args.h"
#include "runner.h"

namespace hoop::bench {

struct RunInfo {
  int nranks = 1;
  int local_ranks = 1;  // ranks on rank 0's host
  std::string host;
};

class Report {
 public:
  // Opens the CSV and JSON files; throws hoop::Error{invalid_argument} naming a file that
  // cannot be written.
  Report(const BenchConfig& cfg, RunInfo info);

  void print_header();
  // algo: the name given to the library, "" for its own choice.
  void begin_section(const std::string& algo);
  void add_row(const RowResult& row);
  void end_section();
  // The closing lines, and the JSON file.
  void finish();

  uint64_t total_wrong() const { return total_wrong_; }

 private:
  // The measurement's share of the section's average, the total and the files.
  void record(const RowResult& row, const Measurement& m, bool in_place);
  void write_csv_row(const RowResult& row, const Measurement& m, bool in_place);
  nlohmann::ordered_json json_row(const RowResult& row, const Measurement& m, bool in_place) const;

  const BenchConfig& cfg_;
  RunInfo info_;
  std::string section_algo_;  // "auto" or the algorithm's name
  bool section_is_auto_ = false;
  std::vector<double> section_busbw_;
  uint64_t total_wrong_ = 0;
  std::ofstream csv_;
  nlohmann::ordered_json json_;
};

}  // namespace hoop::bench
