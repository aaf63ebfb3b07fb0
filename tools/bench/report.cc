#include "report.h"

#include <fmt/format.h>

#include <cstdio>
#include <numeric>

#include "core/errors.h"
#include "hoop/version.h"

namespace hoop::bench {

namespace {

const char* placement_name(bool in_place) { return in_place ? "in-place" : "out-of-place"; }

std::string redop_column(const BenchConfig& cfg) {
  return is_reducing(cfg.collective) ? std::string(to_string(cfg.op)) : "none";
}

int root_column(const BenchConfig& cfg) { return has_root(cfg.collective) ? cfg.root : -1; }

std::string busbw_formula(OpType c) {
  if (c == OpType::allreduce) return "2(N-1)/N";
  return splits_among_ranks(c) ? "(N-1)/N" : "1";
}

std::string size_steps_text(const SizeSteps& s) {
  if (s.factor > 1) return fmt::format("{} .. {} bytes, x{}", s.min_bytes, s.max_bytes, s.factor);
  return fmt::format("{} .. {} bytes, +{}", s.min_bytes, s.max_bytes, s.step_bytes);
}

std::string wrong_text(const Measurement& m) {
  return m.wrong ? std::to_string(*m.wrong) : "N/A";
}

std::string time_text(double us) {
  return us < 1e6 ? fmt::format("{:9.2f}", us) : fmt::format("{:9.0f}", us);
}

// The columns of one placement: time (with --stats: min, max, stddev), algbw, busbw, #wrong.
std::string measurement_columns(const Measurement& m, bool stats) {
  std::string text = " " + time_text(m.time.median);
  if (stats) {
    text += fmt::format(" {} {} {}", time_text(m.time.min), time_text(m.time.max),
                        time_text(m.time.stddev));
  }
  return text + fmt::format(" {:7.2f} {:7.2f} {:>6}", m.algbw_gbps, m.busbw_gbps, wrong_text(m));
}

// Their two heading lines (names, units).
std::string measurement_heads(bool stats, bool units) {
  std::string text = fmt::format(" {:>9}", units ? "(us)" : "time");
  if (stats) {
    text += units ? fmt::format(" {:>9} {:>9} {:>9}", "(us)", "(us)", "(us)")
                  : fmt::format(" {:>9} {:>9} {:>9}", "min", "max", "stddev");
  }
  return text + fmt::format(" {:>7} {:>7} {:>6}", units ? "(GB/s)" : "algbw",
                            units ? "(GB/s)" : "busbw", units ? "" : "#wrong");
}

std::string algo_used_text(const RowResult& row) {
  const std::string& a = row.out_of_place.algo_used;
  if (!row.in_place || row.in_place->algo_used == a) return a;
  return a + "/" + row.in_place->algo_used;
}

std::string time_description(const BenchConfig& cfg) {
  return fmt::format("{} over iterations of the per-iteration time, {}",
                     cfg.stats ? "median (and min, max, sample standard deviation)" : "median",
                     to_string(cfg.combine));
}

std::string blocks_text(const BenchConfig& cfg) {
  if (!cfg.uneven) return "equal";
  return "uneven, rank k's in proportion to k % 3 (ranks 0, 3, 6... get none)";
}

}  // namespace

Report::Report(const BenchConfig& cfg, RunInfo info) : cfg_(cfg), info_(std::move(info)) {
  if (!cfg_.csv_path.empty()) {
    csv_.open(cfg_.csv_path, std::ios::out | std::ios::trunc);
    if (!csv_) throw_error(ErrorCode::invalid_argument, "cannot write --csv " + cfg_.csv_path);
    csv_ << "collective,algo,algo_used,placement,size_bytes,count,type,redop,root,time_us,"
         << (cfg_.stats ? "time_min_us,time_max_us,time_stddev_us," : "")
         << "algbw_gbps,busbw_gbps,wrong,nranks,iters,warmup_iters,blocking\n";
    csv_.flush();
  }
  if (!cfg_.json_path.empty()) {
    // Open now so a bad path fails before the run rather than after it.
    std::ofstream probe(cfg_.json_path, std::ios::out | std::ios::trunc);
    if (!probe) throw_error(ErrorCode::invalid_argument, "cannot write --json " + cfg_.json_path);
  }
  json_ = {
      {"tool", "hoop-bench"},
      {"hoop_version", HOOP_VERSION_STRING},
      {"collective", std::string(to_string(cfg_.collective))},
      {"nranks", info_.nranks},
      {"local_ranks", info_.local_ranks},
      {"host", info_.host},
      {"dtype", std::string(to_string(cfg_.dtype))},
      {"redop", redop_column(cfg_)},
      {"root", root_column(cfg_)},
      {"iters", cfg_.iters},
      {"warmup_iters", cfg_.warmup_iters},
      {"blocking", cfg_.blocking},
      {"check", cfg_.check},
      {"uneven", cfg_.uneven},
      {"time", time_description(cfg_)},
      {"busbw_factor", busbw_factor(cfg_.collective, info_.nranks)},
      {"rows", nlohmann::ordered_json::array()},
      {"avg_busbw_gbps", nlohmann::ordered_json::object()},
  };
}

void Report::print_header() {
  fmt::print("# hoop-bench {} | hoop {} | {} rank{} ({} on this host) | host {}\n",
             to_string(cfg_.collective), HOOP_VERSION_STRING, info_.nranks,
             info_.nranks == 1 ? "" : "s", info_.local_ranks, info_.host);
  fmt::print("#   sizes {} | warm-up {} + timed {} iterations per size | {} | check {}{}\n",
             size_steps_text(cfg_.sizes), cfg_.warmup_iters, cfg_.iters,
             cfg_.blocking ? "blocking calls" : "asynchronous calls", cfg_.check ? "on" : "off",
             cfg_.registered ? " | registered buffers" : "");
  fmt::print("#   time: {}, in us{}\n", time_description(cfg_),
             cfg_.blocking ? "" : "; asynchronous: one sample, total time / iterations");
  if (is_vector_op(cfg_.collective)) {
    fmt::print("#   blocks of the ranks: {}\n", blocks_text(cfg_));
  }
  if (!has_in_place(cfg_.collective)) {
    fmt::print("#   out of place only: {} has no in-place form\n", to_string(cfg_.collective));
  }
  fmt::print("#   algbw = size / time; busbw = algbw * {} = algbw * {:.3f}; GB/s = 1e9 B/s\n",
             busbw_formula(cfg_.collective), busbw_factor(cfg_.collective, info_.nranks));
  std::fflush(stdout);
}

void Report::begin_section(const std::string& algo) {
  section_is_auto_ = algo.empty();
  section_algo_ = section_is_auto_ ? "auto" : algo;
  section_busbw_.clear();
  const char* algo_col = section_is_auto_ ? "  algo" : "";
  fmt::print("#\n# algorithm: {}\n#\n", section_is_auto_ ? "auto (the library's choice)" : algo);
  // The placement labels centred over their columns; the row columns before them take 45
  // characters.
  const int placements = has_in_place(cfg_.collective) ? 2 : 1;
  const std::string names = measurement_heads(cfg_.stats, false);
  const std::string units = measurement_heads(cfg_.stats, true);
  const size_t width = names.size() - 1;
  fmt::print("#{:44} {:^{}}", "", "out-of-place", width);
  if (placements == 2) fmt::print(" {:^{}}", "in-place", width);
  fmt::print("\n# {:>10} {:>12} {:>6} {:>6} {:>5}{}{}{}\n", "size", "count", "type", "redop",
             "root", names, placements == 2 ? names : "", algo_col);
  fmt::print("# {:>10} {:>12} {:>6} {:>6} {:>5}{}{}\n", "(B)", "(elements)", "", "", "", units,
             placements == 2 ? units : "");
  std::fflush(stdout);
}

void Report::add_row(const RowResult& row) {
  const Layout& l = row.layout;
  fmt::print("  {:>10} {:>12} {:>6} {:>6} {:>5}{}{}{}\n", l.bytes, l.count,
             to_string(cfg_.dtype), redop_column(cfg_), root_column(cfg_),
             measurement_columns(row.out_of_place, cfg_.stats),
             row.in_place ? measurement_columns(*row.in_place, cfg_.stats) : "",
             section_is_auto_ ? "  " + algo_used_text(row) : "");
  std::fflush(stdout);
  record(row, row.out_of_place, false);
  if (row.in_place) record(row, *row.in_place, true);
}

void Report::record(const RowResult& row, const Measurement& m, bool in_place) {
  section_busbw_.push_back(m.busbw_gbps);
  total_wrong_ += m.wrong.value_or(0);
  write_csv_row(row, m, in_place);
  json_["rows"].push_back(json_row(row, m, in_place));
}

void Report::end_section() {
  const double avg =
      section_busbw_.empty()
          ? 0.0
          : std::accumulate(section_busbw_.begin(), section_busbw_.end(), 0.0) /
                static_cast<double>(section_busbw_.size());
  fmt::print("# Avg bus bandwidth    : {:.3f} GB/s ({})\n", avg, section_algo_);
  json_["avg_busbw_gbps"][section_algo_] = avg;
  std::fflush(stdout);
}

void Report::finish() {
  fmt::print("#\n");
  if (cfg_.check) {
    fmt::print("# Wrong elements       : {} {}\n", total_wrong_, total_wrong_ == 0 ? "OK" : "FAILED");
  } else {
    fmt::print("# Wrong elements       : not checked (-c 0)\n");
  }
  std::fflush(stdout);
  if (cfg_.check) json_["wrong_total"] = total_wrong_;
  if (!cfg_.json_path.empty()) {
    std::ofstream out(cfg_.json_path, std::ios::out | std::ios::trunc);
    out << json_.dump(2) << "\n";
    if (!out) throw_error(ErrorCode::internal, "cannot write --json " + cfg_.json_path);
  }
}

void Report::write_csv_row(const RowResult& row, const Measurement& m, bool in_place) {
  if (!csv_.is_open()) return;
  const std::string spread =
      cfg_.stats ? fmt::format("{},{},{},", m.time.min, m.time.max, m.time.stddev) : "";
  csv_ << fmt::format("{},{},{},{},{},{},{},{},{},{},{}{},{},{},{},{},{},{}\n",
                      to_string(cfg_.collective), section_algo_, m.algo_used,
                      placement_name(in_place), row.layout.bytes, row.layout.count,
                      to_string(cfg_.dtype), redop_column(cfg_), root_column(cfg_),
                      m.time.median, spread, m.algbw_gbps, m.busbw_gbps,
                      m.wrong ? std::to_string(*m.wrong) : "", info_.nranks, cfg_.iters,
                      cfg_.warmup_iters, cfg_.blocking ? 1 : 0);
  csv_.flush();
}

nlohmann::ordered_json Report::json_row(const RowResult& row, const Measurement& m,
                                        bool in_place) const {
  nlohmann::ordered_json j = {
      {"algo", section_algo_},
      {"algo_used", m.algo_used},
      {"placement", placement_name(in_place)},
      {"size_bytes", row.layout.bytes},
      {"count", row.layout.count},
      {"type", std::string(to_string(cfg_.dtype))},
      {"redop", redop_column(cfg_)},
      {"root", root_column(cfg_)},
      {"time_us", m.time.median},
  };
  if (cfg_.stats) {
    j["time_min_us"] = m.time.min;
    j["time_max_us"] = m.time.max;
    j["time_stddev_us"] = m.time.stddev;
  }
  j["algbw_gbps"] = m.algbw_gbps;
  j["busbw_gbps"] = m.busbw_gbps;
  j["wrong"] = m.wrong ? nlohmann::ordered_json(*m.wrong) : nlohmann::ordered_json(nullptr);
  return j;
}

}  // namespace hoop::bench
