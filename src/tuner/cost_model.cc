#include "tuner/cost_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/errors.h"

namespace hoop::tuner {

const char* to_string(LinkClass c) { return c == LinkClass::shm ? "shm" : "tcp"; }

namespace {

nlohmann::json link_json(const LinkCost& l) {
  return {{"alpha_s", l.alpha},         {"beta_Bps", l.beta},          {"endpoint_beta_Bps", l.endpoint_beta},
          {"cpu_s", l.cpu},             {"cpu_s_per_byte", l.cpu_byte}, {"handoff_s", l.handoff},
          {"skew_s", l.skew},           {"sustained_Bps", l.sustained}, {"burst_bytes", l.burst}};
}

double positive(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.contains(key) || !j.at(key).is_number()) {
    throw_error(ErrorCode::invalid_argument, fmt::format("cost model: {} lacks the number '{}'", where, key));
  }
  const double v = j.at(key).get<double>();
  if (!(v >= 0)) {
    throw_error(ErrorCode::invalid_argument, fmt::format("cost model: {}.{} = {} is negative", where, key, v));
  }
  return v;
}

// A size of the model: a whole number of bytes, at least one.
size_t byte_count(const nlohmann::json& j, const char* key) {
  const auto v = static_cast<size_t>(positive(j, key, "model"));
  if (v == 0) throw_error(ErrorCode::invalid_argument, fmt::format("cost model: {} is 0", key));
  return v;
}

LinkCost link_from(const nlohmann::json& j, const char* name, const LinkCost& fallback) {
  if (!j.contains(name)) return fallback;
  const auto& l = j.at(name);
  LinkCost c;
  c.alpha = positive(l, "alpha_s", name);
  c.beta = positive(l, "beta_Bps", name);
  c.endpoint_beta = l.contains("endpoint_beta_Bps") ? positive(l, "endpoint_beta_Bps", name) : c.beta;
  // Measured since the processor's part was priced; older files leave them unknown (0).
  if (l.contains("cpu_s")) c.cpu = positive(l, "cpu_s", name);
  if (l.contains("cpu_s_per_byte")) c.cpu_byte = positive(l, "cpu_s_per_byte", name);
  if (l.contains("handoff_s")) c.handoff = positive(l, "handoff_s", name);
  if (l.contains("skew_s")) c.skew = positive(l, "skew_s", name);
  if (l.contains("sustained_Bps")) c.sustained = positive(l, "sustained_Bps", name);
  if (l.contains("burst_bytes")) c.burst = positive(l, "burst_bytes", name);
  if (c.beta <= 0 || c.endpoint_beta <= 0) {
    throw_error(ErrorCode::invalid_argument, fmt::format("cost model: {} has a zero bandwidth", name));
  }
  return c;
}

}  // namespace

std::string to_json(const CostModel& m) {
  nlohmann::json j;
  j["shm"] = link_json(m.shm);
  j["tcp"] = link_json(m.tcp);
  j["gamma_s_per_byte"] = m.gamma;
  j["copy_s_per_byte"] = m.copy;
  j["memory_copy_s_per_byte"] = m.memory_copy;
  j["overhead_fraction"] = m.overhead_fraction;
  j["slice_bytes"] = m.slice_bytes;
  j["shm_ring_bytes"] = m.shm_ring_bytes;
  j["shm_ring_full_bytes"] = m.shm_ring_full_bytes;
  j["cores"] = m.cores;
  j["single_copy_read_bytes"] = m.single_copy_read_bytes;
  j["source"] = m.source;
  return j.dump();
}

CostModel model_from_json(const std::string& text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw_error(ErrorCode::invalid_argument, fmt::format("cost model: not JSON: {}", e.what()));
  }
  if (!j.is_object()) throw_error(ErrorCode::invalid_argument, "cost model: not a JSON object");
  // A calibration cache file holds the model under "model", beside what was measured.
  if (j.contains("model") && j.at("model").is_object()) j = nlohmann::json(j.at("model"));
  static constexpr const char* kKeys[] = {"shm", "tcp", "gamma_s_per_byte", "copy_s_per_byte",
                                          "overhead_fraction", "slice_bytes", "shm_ring_bytes", "cores"};
  if (std::none_of(std::begin(kKeys), std::end(kKeys), [&](const char* k) { return j.contains(k); })) {
    throw_error(ErrorCode::invalid_argument,
                "cost model: none of 'shm', 'tcp', 'gamma_s_per_byte', 'copy_s_per_byte', 'overhead_fraction', "
                "'slice_bytes', 'shm_ring_bytes', 'cores' (nor a calibration cache's 'model') is in the JSON object");
  }
  CostModel m;
  m.shm = link_from(j, "shm", m.shm);
  m.tcp = link_from(j, "tcp", m.tcp);
  if (j.contains("gamma_s_per_byte")) m.gamma = positive(j, "gamma_s_per_byte", "model");
  if (j.contains("copy_s_per_byte")) m.copy = positive(j, "copy_s_per_byte", "model");
  // Absent (a model written before it was measured) or 0: not measured.
  if (j.contains("memory_copy_s_per_byte")) m.memory_copy = positive(j, "memory_copy_s_per_byte", "model");
  if (j.contains("overhead_fraction")) m.overhead_fraction = positive(j, "overhead_fraction", "model");
  if (j.contains("slice_bytes")) m.slice_bytes = byte_count(j, "slice_bytes");
  if (j.contains("shm_ring_bytes")) m.shm_ring_bytes = byte_count(j, "shm_ring_bytes");
  // Absent (a model written before it existed): the ring did not shrink.
  m.shm_ring_full_bytes = j.contains("shm_ring_full_bytes") ? byte_count(j, "shm_ring_full_bytes") : m.shm_ring_bytes;
  if (j.contains("cores")) m.cores = static_cast<int>(positive(j, "cores", "model"));
  if (j.contains("single_copy_read_bytes")) {
    const auto& v = j.at("single_copy_read_bytes");
    if (!v.is_number_unsigned()) {
      throw_error(ErrorCode::invalid_argument, "cost model: 'single_copy_read_bytes' must be a count of bytes (0: not measured)");
    }
    m.single_copy_read_bytes = v.get<size_t>();
  }
  if (j.contains("source") && j.at("source").is_string()) m.source = j.at("source").get<std::string>();
  return m;
}

CostModel load_model_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw_error(ErrorCode::invalid_argument, fmt::format("cannot read cost model file '{}'", path));
  std::stringstream ss;
  ss << in.rdbuf();
  CostModel m = model_from_json(ss.str());
  m.source = "file " + path;
  return m;
}

std::string to_table(const CostModel& m) {
  std::string out = fmt::format("cost model ({})\n", m.source);
  out += fmt::format("  {:<5} {:>12} {:>14} {:>18} {:>17} {:>12} {:>10} {:>13} {:>12} {:>10}\n", "link",
                     "alpha (us)", "beta (GB/s)", "endpoint (GB/s)", "sustained (GB/s)", "burst (KiB)", "cpu (us)",
                     "cpu/KiB (us)", "handoff (us)", "skew (us)");
  auto known = [](double v, double scale, const char* spec) {
    return v > 0 ? fmt::format(fmt::runtime(spec), v * scale) : std::string("-");
  };
  for (LinkClass c : {LinkClass::shm, LinkClass::tcp}) {
    const LinkCost& l = m.link(c);
    out += fmt::format("  {:<5} {:>12.2f} {:>14.3f} {:>18.3f} {:>17} {:>12} {:>10} {:>13} {:>12} {:>10}\n",
                       to_string(c), l.alpha * 1e6, l.beta / 1e9, l.endpoint_beta / 1e9,
                       known(l.sustained, 1e-9, "{:.3f}"), known(l.burst, 1.0 / 1024, "{:.0f}"),
                       known(l.cpu, 1e6, "{:.2f}"), known(l.cpu_byte, 1024e6, "{:.2f}"), known(l.handoff, 1e6, "{:.2f}"),
                       known(l.skew, 1e6, "{:.1f}"));
  }
  auto rate = [](double s_per_byte) { return s_per_byte > 0 ? fmt::format("{:.3f} GB/s", 1e-9 / s_per_byte) : std::string("free"); };
  out += fmt::format("  gamma (reduce) {}, copy {} (through memory {}), slice {} B, shm rings {} B, extra message {:.2f} alpha, cores {}, "
                     "single copy from {}\n",
                     rate(m.gamma), rate(m.copy), m.memory_copy > 0 ? rate(m.memory_copy) : std::string("-"), m.slice_bytes, m.shm_ring_bytes, m.overhead_fraction,
                     m.cores > 0 ? std::to_string(m.cores) : std::string("-"),
                     m.single_copy_read_bytes > 0 ? fmt::format("{} B a read", m.single_copy_read_bytes) : std::string("-"));
  return out;
}

size_t shaped_link_window(const CostModel& m) {
  if (m.tcp.sustained <= 0) return 0;
  constexpr double kQueueSeconds = 2e-3;
  constexpr size_t kSmallest = 64 * 1024;
  return std::max(kSmallest, static_cast<size_t>(m.tcp.sustained * kQueueSeconds));
}

}  // namespace hoop::tuner
