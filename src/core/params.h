// Every HOOP_* environment variable hoop reads, declared once (src/core/params.cc: name, type,
// default, accepted values, one line of doc) and read only through this header. A value that
// is not of the declared type or outside the accepted values is an error naming the variable
// and what it accepts (a few read where no error can surface warn and use the default instead).
// The README's table of variables is checked against the table (tests/test_params.cc).
#pragma once

#include <chrono>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace hoop::params {

enum class Kind : uint8_t {
  text,     // any string
  integer,  // a decimal integer in [min, max]
  size,     // bytes: "123", "64K", "4M", "1G" (powers of 1024), in [min, max]
  seconds,  // a number of seconds, fractions allowed ("0.5"), at least 0
  choice,   // one of `choices` (or an alias)
};

// What a malformed value does.
enum class OnBad : uint8_t {
  error,  // throws hoop::Error{invalid_argument} naming the variable and what it accepts
  warn,   // warns once per read and uses the default (read where an error cannot surface)
  quiet,  // uses the default silently (HOOP_DEBUG: read by the logger itself)
};

// Where a variable's value came from.
enum class Origin : uint8_t { default_value, environment, launcher };

enum class Id : uint8_t;

struct Param {
  Id id;
  std::string_view name;
  Kind kind;
  // The default as the variable would spell it; empty: unset, and `doc` says what that means.
  std::string_view fallback;
  std::string_view doc;  // one line; the README's table says the same
  int64_t min = 0;       // integer, size: accepted range
  int64_t max = std::numeric_limits<int64_t>::max();
  std::string_view choices = {};  // choice: accepted values, '|'-separated
  std::string_view aliases = {};  // choice: other accepted spellings, '|'-separated
  bool fold_case = false;         // choice: "info" counts as "INFO"
  bool launcher = false;          // set for each rank by hoop-run (or another launcher)
  bool hidden = false;            // value never printed (a secret)
  OnBad on_bad = OnBad::error;
};

enum class Id : uint8_t {
  debug,
  timeout,
  transport,
  algo,
  nchannels,
  socket_ifname,
  socket_family,
  socket_buffer,
  tcp_staging_bytes,
  tcp_handshake_timeout,
  tcp_congestion,
  check,
  secret,
  shm_ring_bytes,
  slice_bytes,
  spin_us,
  kernel_isa,
  direct_cell_bytes,
  direct_small_bytes,
  direct_chunk_bytes,
  direct_stages,
  direct_single_copy_bytes,
  direct_single_copy_allreduce_bytes,
  direct_single_copy_alltoall_bytes,
  direct_single_copy_part_bytes,
  direct_registered_bytes,
  direct_stream_bytes,
  host_id,
  trace,
  calibrate,
  store_port,
  rank,
  world_size,
  local_rank,
  local_size,
  store_addr,
  job_id,
  restart_count,
  join,
  count_  // not a variable
};

std::span<const Param> all() noexcept;
const Param& param(Id id) noexcept;
// The declaration of `name`, or null when hoop has no such variable.
const Param* find(std::string_view name) noexcept;

// The environment's text, nullopt when unset or empty; not checked.
std::optional<std::string> raw(Id id);
// Any variable's environment text (launchers' own, such as RANK, included); a HOOP_* name must
// be declared (throws Error{internal} otherwise).
std::optional<std::string> raw(std::string_view name);
Origin origin(Id id);
std::string_view to_string(Origin o) noexcept;

// Checked reads: the environment's value, else the default (for the kinds with one). Throw as
// OnBad says when the environment's value is not accepted.
std::optional<std::string> text(Id id);  // text, choice: nullopt when unset without a default
std::string text_or(Id id, std::string_view when_unset);
int64_t integer(Id id);                  // needs a default
std::optional<int64_t> integer_if_set(Id id);
uint64_t bytes(Id id);                   // size; needs a default
std::chrono::milliseconds seconds(Id id);  // needs a default

// Why the environment's value of `id` is not accepted, or nullopt when it is (or is unset).
std::optional<std::string> problem(Id id);
// "an integer from 1 to 16", "one of auto|shm|tcp", ...
std::string accepted(const Param& p);
// One line for hoop-topo --params: name, value (the environment's, else the default; a hidden
// one as "(hidden)"), where it came from, and why the value is not accepted if it is not.
std::string describe(Id id);

}  // namespace hoop::params
