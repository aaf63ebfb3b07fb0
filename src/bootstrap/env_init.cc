#include "bootstrap/env_init.h"

#include <cstdlib>
#include <optional>
#include <string_view>
#include <vector>

#include "core/env.h"
#include "core/errors.h"
#include "core/params.h"

namespace hoop::bootstrap {

namespace {

constexpr uint16_t kDefaultStorePort = 29411;
// A store port derived from the launcher's job number: 20000 + n mod 10000, below Linux's
// ephemeral ports (32768-60999), so that concurrent jobs on one node (consecutive numbers)
// get different ports.
constexpr uint16_t kDerivedPortBase = 20000;
constexpr uint64_t kDerivedPortSpan = 10000;

// The variables one launcher family sets; nullptr: the family has none.
struct Family {
  const char* source;
  const char* rank;
  const char* size;
  const char* local_rank;
  const char* local_size;
};

constexpr Family kFamilies[] = {
    {"hoop-run", "HOOP_RANK", "HOOP_WORLD_SIZE", "HOOP_LOCAL_RANK", "HOOP_LOCAL_SIZE"},
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"pmi", "PMI_RANK", "PMI_SIZE", nullptr, nullptr},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", nullptr},
};

std::optional<std::string> var(const char* name) {
  if (!name) return std::nullopt;
  return params::raw(std::string_view(name));  // checked here, with ErrorCode::init
}

[[noreturn]] void init_error(const std::string& what) {
  throw_error(ErrorCode::init, what, {.op = "init"});
}

using env::parse_int;

// A non-negative integer variable, or nullopt when unset; malformed values are collected.
std::optional<int> int_var(const char* name, std::vector<std::string>* problems) {
  auto text = var(name);
  if (!text) return std::nullopt;
  auto v = parse_int(*text);
  if (!v || *v < 0 || *v > 1'000'000'000) {
    problems->push_back(fmt::format("{}='{}' is not a non-negative integer", name, *text));
    return std::nullopt;
  }
  return static_cast<int>(*v);
}

uint16_t parse_port(const std::string& text, const char* name) {
  auto v = parse_int(text);
  if (!v || *v < 1 || *v > 65535) {
    init_error(fmt::format("{}='{}' is not a TCP port (1-65535)", name, text));
  }
  return static_cast<uint16_t>(*v);
}

// "host:port" or "[v6 address]:port".
void parse_store_addr(const std::string& text, std::string* host, uint16_t* port) {
  std::string port_text;
  if (!text.empty() && text[0] == '[') {
    const size_t close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      init_error(fmt::format("HOOP_STORE_ADDR='{}' is not [address]:port", text));
    }
    *host = text.substr(1, close - 1);
    port_text = text.substr(close + 2);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == std::string::npos || colon == 0 || text.find(':') != colon) {
      init_error(fmt::format("HOOP_STORE_ADDR='{}' is not host:port (write an IPv6 address as "
                             "[address]:port)",
                             text));
    }
    *host = text.substr(0, colon);
    port_text = text.substr(colon + 1);
  }
  *port = parse_port(port_text, "HOOP_STORE_ADDR's port");
}

const Family* detect_family() {
  for (const Family& f : kFamilies) {
    if (var(f.rank) || var(f.size)) return &f;
  }
  return nullptr;
}

std::string none_found_message() {
  std::string what = "no launcher environment found; set one of:";
  for (const Family& f : kFamilies) what += fmt::format(" {}+{} ({});", f.rank, f.size, f.source);
  what.pop_back();
  return what + " or start the program with hoop-run";
}

// The number of the launcher's job, when it is one: Slurm's job (16 x SLURM_JOB_ID + step,
// so that the steps of one job differ), Open MPI's (OMPI_MCA_ess_base_jobid). Every rank of
// the job computes the same.
std::optional<uint64_t> launcher_job_number(const Family& family) {
  const std::string_view source = family.source;
  const auto number = [](const char* name) -> std::optional<uint64_t> {
    auto text = var(name);
    if (!text) return std::nullopt;
    auto v = parse_int(*text);
    if (!v || *v < 0) return std::nullopt;
    return static_cast<uint64_t>(*v);
  };
  if (source == "slurm") {
    auto job = number("SLURM_JOB_ID");
    if (!job) return std::nullopt;
    return *job * 16 + number("SLURM_STEP_ID").value_or(0) % 16;
  }
  if (source == "openmpi") return number("OMPI_MCA_ess_base_jobid");
  return std::nullopt;
}

void locate_store(const Family& family, EnvInit* out) {
  if (auto addr = var("HOOP_STORE_ADDR")) {
    parse_store_addr(*addr, &out->store_host, &out->store_port);
    out->store_external = true;
    return;
  }
  out->store_external = false;
  if (auto master = var("MASTER_ADDR")) {
    out->store_host = *master;
  } else if (std::string_view(family.source) == "slurm") {
    auto nodes = var("SLURM_STEP_NODELIST");
    if (!nodes) nodes = var("SLURM_JOB_NODELIST");
    out->store_host = nodes ? first_slurm_host(*nodes) : std::string();
  }
  if (out->store_host.empty()) {
    // Rank 0's store on loopback reaches only ranks of its own host.
    if (out->local_size > 0 && out->local_size < out->size) {
      init_error(fmt::format("the {} ranks span several hosts ({} of them on this one) but no "
                             "store address is known: set MASTER_ADDR to rank 0's host, or "
                             "HOOP_STORE_ADDR",
                             out->size, out->local_size));
    }
    out->store_host = "127.0.0.1";
  }
  if (auto port = var("HOOP_STORE_PORT")) {
    out->store_port = parse_port(*port, "HOOP_STORE_PORT");
  } else if (auto master_port = var("MASTER_PORT")) {
    const uint16_t p = parse_port(*master_port, "MASTER_PORT");
    if (p == 65535) init_error("MASTER_PORT=65535 leaves no port for the store (MASTER_PORT + 1)");
    out->store_port = static_cast<uint16_t>(p + 1);
  } else if (auto n = launcher_job_number(family)) {
    out->store_port = static_cast<uint16_t>(kDerivedPortBase + *n % kDerivedPortSpan);
  } else {
    out->store_port = kDefaultStorePort;
  }
}

// The job's own id, for hoop's job id (shared-memory names, handshakes) when HOOP_JOB_ID is
// not set: Slurm's job and step, Open MPI's job (one per mpirun).
std::string launcher_job_id(const Family& family) {
  const std::string_view source = family.source;
  if (source == "slurm") {
    if (auto job_id = var("SLURM_JOB_ID")) {
      std::string id = "slurm-" + *job_id;
      if (auto step = var("SLURM_STEP_ID")) id += "." + *step;
      return id;
    }
  } else if (source == "openmpi") {
    if (auto job_id = var("OMPI_MCA_ess_base_jobid")) return "ompi-" + *job_id;
  }
  return {};
}

}  // namespace

EnvInit read_init_env() {
  const Family* family = detect_family();
  if (!family) init_error(none_found_message());
  EnvInit out;
  out.source = family->source;

  std::vector<std::string> problems;
  auto rank = int_var(family->rank, &problems);
  auto size = int_var(family->size, &problems);
  auto local_rank = int_var(family->local_rank, &problems);
  auto local_size = int_var(family->local_size, &problems);
  if (!var(family->rank)) problems.push_back(fmt::format("{} is not set", family->rank));
  if (!var(family->size)) problems.push_back(fmt::format("{} is not set", family->size));
  if (rank && size && *rank >= *size) {
    problems.push_back(fmt::format("{}={} is not below {}={}", family->rank, *rank, family->size,
                                   *size));
  }
  if (size && *size == 0) problems.push_back(fmt::format("{}=0", family->size));
  if (local_rank && local_size && *local_rank >= *local_size) {
    problems.push_back(fmt::format("{}={} is not below {}={}", family->local_rank, *local_rank,
                                   family->local_size, *local_size));
  }
  if (size && local_size && *local_size > *size) {
    problems.push_back(fmt::format("{}={} exceeds {}={}", family->local_size, *local_size,
                                   family->size, *size));
  }
  if (!problems.empty()) {
    std::string what = fmt::format("{} environment (found {}):", family->source,
                                   var(family->rank) ? family->rank : family->size);
    for (size_t i = 0; i < problems.size(); ++i) what += (i ? "; " : " ") + problems[i];
    init_error(what);
  }
  out.rank = *rank;
  out.size = *size;
  out.local_rank = local_rank.value_or(-1);
  out.local_size = local_size.value_or(-1);

  locate_store(*family, &out);

  if (auto job = var("HOOP_JOB_ID")) {
    out.job_id = *job;
  } else {
    out.job_id = launcher_job_id(*family);
  }
  return out;
}

// Slurm's compressed host lists: items separated by commas outside brackets, a bracket holds
// numbers and ranges ("03-05") whose zero padding is kept. Only the first host is expanded.
std::string first_slurm_host(const std::string& nodelist) {
  std::string host;
  size_t i = 0;
  while (i < nodelist.size() && nodelist[i] != ',') {
    const char c = nodelist[i];
    if (c != '[') {
      if (c == ']') init_error(fmt::format("malformed Slurm node list '{}'", nodelist));
      host.push_back(c);
      ++i;
      continue;
    }
    const size_t close = nodelist.find(']', i);
    if (close == std::string::npos) {
      init_error(fmt::format("malformed Slurm node list '{}': unclosed '['", nodelist));
    }
    // The first number of the bracket: up to the first ',' or '-'.
    size_t end = i + 1;
    while (end < close && nodelist[end] != ',' && nodelist[end] != '-') ++end;
    const std::string first = nodelist.substr(i + 1, end - i - 1);
    if (first.empty() || first.find_first_not_of("0123456789") != std::string::npos) {
      init_error(fmt::format("malformed Slurm node list '{}': bad range in brackets", nodelist));
    }
    host += first;
    i = close + 1;
  }
  return host;
}

}  // namespace hoop::bootstrap
