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
  return has_redop(cfg.collective) ? std::string(to_string(cfg.op)) : "none";
}

int root_column(const BenchConfig& cfg) { return has_root(cfg.collective) ? cfg.root : -1; }

std::string busbw_formula(OpType c) {
  switch (c) {
    case OpType::allreduce: return "2(N-1)/N";
    case OpType::reducescatter:
    case OpType::allgather: return "(N-1)/N";
    default: return "1";
  }
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

std::string measurement_columns(const Measurement& m) {
  return fmt::format("{} {:7.2f} {:7.2f} {:>6}", time_text(m.time_us), m.algbw_gbps,
                     m.busbw_gbps, wrong_text(m));
}

std::string algo_used_text(const RowResult& row) {
  const std::string& a = row.out_of_place.algo_used;
  const std::string& b = row.in_place.algo_used;
  return a == b ? a : a + "/" + b;
}

}  // namespace

Report::Report(const BenchConfig& cfg, RunInfo info) : cfg_(cfg), info_(std::move(info)) {
  if (!cfg_.csv_path.empty()) {
    csv_.open(cfg_.csv_path, std::ios::out | std::ios::trunc);
    if (!csv_) throw_error(ErrorCode::invalid_argument, "cannot write --csv " + cfg_.csv_path);
    csv_ << "collective,algo,algo_used,placement,size_bytes,count,type,redop,root,time_us,"
            "algbw_gbps,busbw_gbps,wrong,nranks,iters,warmup_iters,blocking\n";
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
      {"time", fmt::format("median over iterations of the per-iteration time, {}",
                           to_string(cfg_.combine))},
      {"busbw_factor", busbw_factor(cfg_.collective, info_.nranks)},
      {"rows", nlohmann::ordered_json::array()},
      {"avg_busbw_gbps", nlohmann::ordered_json::object()},
  };
}

void Report::print_header() {
  fmt::print("# hoop-bench {} | hoop {} | {} rank{} ({} on this host) | host {}\n",
             to_string(cfg_.collective), HOOP_VERSION_STRING, info_.nranks,
             info_.nranks == 1 ? "" : "s", info_.local_ranks, info_.host);
  fmt::print("#   sizes {} | warm-up {} + timed {} iterations per size | {} | check {}\n",
             size_steps_text(cfg_.sizes), cfg_.warmup_iters, cfg_.iters,
             cfg_.blocking ? "blocking calls" : "asynchronous calls", cfg_.check ? "on" : "off");
  fmt::print("#   time: median over iterations of the per-iteration time ({}), in us{}\n",
             to_string(cfg_.combine),
             cfg_.blocking ? "" : "; asynchronous: one sample, total time / iterations");
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
  // The placement labels centred over their four columns; the row columns before them take
  // 45 characters.
  fmt::print("#{:44} {:^33} {:^33}\n", "", "out-of-place", "in-place");
  fmt::print("# {:>10} {:>12} {:>6} {:>6} {:>5} {:>9} {:>7} {:>7} {:>6} {:>9} {:>7} {:>7} {:>6}{}\n",
             "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time",
             "algbw", "busbw", "#wrong", algo_col);
  fmt::print("# {:>10} {:>12} {:>6} {:>6} {:>5} {:>9} {:>7} {:>7} {:>6} {:>9} {:>7} {:>7} {:>6}\n",
             "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)",
             "(GB/s)", "");
  std::fflush(stdout);
}

void Report::add_row(const RowResult& row) {
  const Layout& l = row.layout;
  fmt::print("  {:>10} {:>12} {:>6} {:>6} {:>5} {} {}{}\n", l.bytes, l.count,
             to_string(cfg_.dtype), redop_column(cfg_), root_column(cfg_),
             measurement_columns(row.out_of_place), measurement_columns(row.in_place),
             section_is_auto_ ? "  " + algo_used_text(row) : "");
  std::fflush(stdout);
  for (bool in_place : {false, true}) {
    const Measurement& m = in_place ? row.in_place : row.out_of_place;
    section_busbw_.push_back(m.busbw_gbps);
    total_wrong_ += m.wrong.value_or(0);
    write_csv_row(row, in_place);
    json_["rows"].push_back(json_row(row, in_place));
  }
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

void Report::write_csv_row(const RowResult& row, bool in_place) {
  if (!csv_.is_open()) return;
  const Measurement& m = in_place ? row.in_place : row.out_of_place;
  csv_ << fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
                      to_string(cfg_.collective), section_algo_, m.algo_used,
                      placement_name(in_place), row.layout.bytes, row.layout.count,
                      to_string(cfg_.dtype), redop_column(cfg_), root_column(cfg_), m.time_us,
                      m.algbw_gbps, m.busbw_gbps, m.wrong ? std::to_string(*m.wrong) : "",
                      info_.nranks, cfg_.iters, cfg_.warmup_iters, cfg_.blocking ? 1 : 0);
  csv_.flush();
}

nlohmann::ordered_json Report::json_row(const RowResult& row, bool in_place) const {
  const Measurement& m = in_place ? row.in_place : row.out_of_place;
  nlohmann::ordered_json j = {
      {"algo", section_algo_},
      {"algo_used", m.algo_used},
      {"placement", placement_name(in_place)},
      {"size_bytes", row.layout.bytes},
      {"count", row.layout.count},
      {"type", std::string(to_string(cfg_.dtype))},
      {"redop", redop_column(cfg_)},
      {"root", root_column(cfg_)},
      {"time_us", m.time_us},
      {"algbw_gbps", m.algbw_gbps},
      {"busbw_gbps", m.busbw_gbps},
  };
  j["wrong"] = m.wrong ? nlohmann::ordered_json(*m.wrong) : nlohmann::ordered_json(nullptr);
  return j;
}

}  // namespace hoop::bench
