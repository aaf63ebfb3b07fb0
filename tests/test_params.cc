// The registry of HOOP_* variables (src/core/params.*): the README's table says what it says,
// every read goes through it, bad values are errors naming the variable and what it takes,
// the defaults are the ones the code had, and the environment beats the default.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/params.h"
#include "engine/engine.h"
#include "hoop/error.h"
#include "support/scoped_env.h"
#include "support/spawn.h"
#include "support/tool_process.h"
#include "transport/tcp/socket_options.h"

namespace hoop::test {
namespace {

namespace fs = std::filesystem;
using params::Id;
using params::Kind;

std::string escape_bars(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

// The README's table as the registry would write it.
std::vector<std::string> expected_table() {
  std::vector<std::string> rows = {"| variable | accepts | default | set by | meaning |",
                                   "|---|---|---|---|---|"};
  for (const auto& p : params::all()) {
    rows.push_back(fmt::format("| `{}` | {} | {} | {} | {} |", p.name, escape_bars(params::accepted(p)),
                               p.fallback.empty() ? "unset" : escape_bars(p.fallback),
                               p.launcher ? "launcher" : "user", escape_bars(p.doc)));
  }
  return rows;
}

// The table under the README's "### Environment": its lines from the header to the last row.
std::vector<std::string> readme_table() {
  std::ifstream in(std::string(HOOP_SOURCE_DIR) + "/README.md");
  std::vector<std::string> rows;
  std::string line;
  bool in_section = false;
  while (std::getline(in, line)) {
    if (line.starts_with("### ")) {
      if (in_section) break;
      in_section = line == "### Environment";
      continue;
    }
    if (in_section && line.starts_with("|")) rows.push_back(line);
    else if (in_section && !rows.empty()) break;
  }
  return rows;
}

TEST(Params, ReadmeTableMatchesTheRegistry) {
  const auto expected = expected_table();
  const auto readme = readme_table();
  std::string want;
  for (const auto& row : expected) want += row + "\n";
  ASSERT_FALSE(readme.empty()) << "README.md has no table under ### Environment";
  EXPECT_EQ(readme.size(), expected.size()) << "README.md's table should be:\n" << want;
  for (size_t i = 0; i < std::min(readme.size(), expected.size()); ++i) {
    EXPECT_EQ(readme[i], expected[i]) << "row " << i << "; README.md's table should be:\n" << want;
  }
}

TEST(Params, TableIsWellFormed) {
  std::set<std::string_view> names;
  for (const auto& p : params::all()) {
    EXPECT_TRUE(p.name.starts_with("HOOP_")) << p.name;
    EXPECT_TRUE(names.insert(p.name).second) << p.name << " declared twice";
    EXPECT_EQ(&params::param(p.id), &p);
    EXPECT_EQ(params::find(p.name), &p);
    EXPECT_FALSE(p.doc.empty()) << p.name;
    EXPECT_EQ(p.doc.find('\n'), std::string_view::npos) << p.name;
    EXPECT_LE(p.min, p.max) << p.name;
    EXPECT_EQ(p.kind == Kind::choice, !p.choices.empty()) << p.name;
  }
  EXPECT_EQ(params::find("HOOP_NO_SUCH_VARIABLE"), nullptr);
}

// Every default is a value the variable accepts.
TEST(Params, DefaultsAreAccepted) {
  for (const auto& p : params::all()) {
    if (p.fallback.empty()) continue;
    ScopedEnv env(std::string(p.name).c_str(), std::string(p.fallback).c_str());
    EXPECT_EQ(params::problem(p.id), std::nullopt) << p.name << "=" << p.fallback;
  }
}

void unset_all(std::vector<std::unique_ptr<ScopedEnv>>* scopes) {
  for (const auto& p : params::all()) {
    scopes->push_back(std::make_unique<ScopedEnv>(std::string(p.name).c_str(), nullptr));
  }
}

// The defaults are those the code had before the registry, or chosen by measurement since
// (HOOP_DIRECT_SINGLE_COPY_BYTES: 1M until 2026-12-06; HOOP_DIRECT_SINGLE_COPY_ALLTOALL_BYTES: 16K
// until 2026-12-07; docs/BENCHMARKS.md).
TEST(Params, DefaultsUnchanged) {
  std::vector<std::unique_ptr<ScopedEnv>> scopes;
  unset_all(&scopes);
  const engine::EngineConfig built_in;
  const auto cfg = engine::config_from_env(1);
  EXPECT_EQ(cfg.slice_bytes, built_in.slice_bytes);
  EXPECT_EQ(cfg.spin, built_in.spin);
  EXPECT_EQ(params::seconds(Id::timeout), std::chrono::seconds(300));
  EXPECT_EQ(params::seconds(Id::tcp_handshake_timeout), std::chrono::seconds(5));
  EXPECT_EQ(transport::tcp::socket_buffer_bytes(), size_t{4} << 20);
  EXPECT_EQ(params::bytes(Id::tcp_staging_bytes), uint64_t{4} << 20);
  EXPECT_EQ(params::bytes(Id::shm_ring_bytes), uint64_t{4} << 20);
  EXPECT_EQ(params::bytes(Id::direct_cell_bytes), uint64_t{64} << 10);
  EXPECT_EQ(params::bytes(Id::direct_small_bytes), uint64_t{16} << 10);
  EXPECT_EQ(params::bytes(Id::direct_chunk_bytes), uint64_t{512} << 10);
  EXPECT_EQ(params::integer(Id::direct_stages), 2);
  EXPECT_EQ(params::bytes(Id::direct_single_copy_bytes), uint64_t{64} << 10);
  EXPECT_EQ(params::bytes(Id::direct_single_copy_allreduce_bytes), uint64_t{64} << 20);
  EXPECT_EQ(params::bytes(Id::direct_single_copy_alltoall_bytes), uint64_t{4} << 10);
  EXPECT_EQ(params::bytes(Id::direct_single_copy_part_bytes), uint64_t{1} << 20);
  EXPECT_EQ(params::text(Id::transport), "auto");
  EXPECT_EQ(params::text(Id::calibrate), "1");
  EXPECT_EQ(params::text(Id::debug), "WARN");
  EXPECT_EQ(params::integer(Id::check), 0);
  EXPECT_EQ(params::integer(Id::restart_count), 0);
  EXPECT_EQ(params::integer_if_set(Id::nchannels), std::nullopt);
  EXPECT_EQ(params::text(Id::trace), std::nullopt);
  EXPECT_EQ(params::text(Id::kernel_isa), std::nullopt);
  for (const auto& p : params::all()) EXPECT_EQ(params::origin(p.id), params::Origin::default_value) << p.name;
}

// A value of the wrong type or outside the range, for every variable that has a type.
const char* bad_value(const params::Param& p) {
  switch (p.kind) {
    case Kind::integer: return "twelve";
    case Kind::size: return "12Q";
    case Kind::seconds: return "-1";
    case Kind::choice: return "bogus";
    case Kind::text: break;
  }
  return nullptr;
}

// The checked read of the variable's kind.
void read(const params::Param& p) {
  switch (p.kind) {
    case Kind::integer:
      if (p.fallback.empty()) (void)params::integer_if_set(p.id);
      else (void)params::integer(p.id);
      break;
    case Kind::size: (void)params::bytes(p.id); break;
    case Kind::seconds: (void)params::seconds(p.id); break;
    case Kind::choice:
    case Kind::text: (void)params::text(p.id); break;
  }
}

void expect_rejected(const params::Param& p, const char* value) {
  ScopedEnv env(std::string(p.name).c_str(), value);
  const auto why = params::problem(p.id);
  ASSERT_TRUE(why.has_value()) << p.name << "=" << value;
  EXPECT_NE(why->find(p.name), std::string::npos) << *why;
  EXPECT_NE(why->find(params::accepted(p)), std::string::npos) << *why;
  if (p.on_bad != params::OnBad::error) {
    EXPECT_NO_THROW(read(p)) << p.name;
    return;
  }
  try {
    read(p);
    ADD_FAILURE() << p.name << "=" << value << " was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_NE(std::string(e.what()).find(p.name), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(params::accepted(p)), std::string::npos) << e.what();
  }
}

TEST(Params, BadValuesNameTheVariableAndWhatItTakes) {
  for (const auto& p : params::all()) {
    if (const char* bad = bad_value(p)) expect_rejected(p, bad);
  }
}

TEST(Params, OutOfRangeValuesAreRejected) {
  expect_rejected(params::param(Id::direct_stages), "17");
  expect_rejected(params::param(Id::direct_stages), "0");
  expect_rejected(params::param(Id::nchannels), "0");
  expect_rejected(params::param(Id::check), "2");
  expect_rejected(params::param(Id::spin_us), "-5");
  expect_rejected(params::param(Id::store_port), "65536");
  EXPECT_NE(params::accepted(params::param(Id::direct_stages)).find("from 1 to 16"), std::string::npos);
}

TEST(Params, BadValuesFailTheirReaders) {
  {
    ScopedEnv env("HOOP_SPIN_US", "-5");
    EXPECT_THROW(engine::config_from_env(1), Error);
  }
  {
    ScopedEnv env("HOOP_SOCKET_BUFFER", "lots");
    EXPECT_THROW(transport::tcp::socket_buffer_bytes(), Error);
  }
}

TEST(Params, AcceptedSpellings) {
  {
    ScopedEnv env("HOOP_DEBUG", "info");  // case folded
    EXPECT_EQ(params::problem(Id::debug), std::nullopt);
  }
  {
    ScopedEnv env("HOOP_SOCKET_FAMILY", "ipv6");  // an alias
    EXPECT_EQ(params::text(Id::socket_family), "ipv6");
  }
  {
    ScopedEnv env("HOOP_TRANSPORT", "TCP");  // not folded
    EXPECT_THROW(params::text(Id::transport), Error);
  }
  {
    ScopedEnv env("HOOP_SLICE_BYTES", "1M");
    EXPECT_EQ(params::bytes(Id::slice_bytes), uint64_t{1} << 20);
  }
  {
    ScopedEnv env("HOOP_TIMEOUT", "0.5");
    EXPECT_EQ(params::seconds(Id::timeout), std::chrono::milliseconds(500));
  }
}

TEST(Params, EnvironmentBeatsDefault) {
  {
    ScopedEnv env("HOOP_SLICE_BYTES", "64K");
    EXPECT_EQ(engine::config_from_env(1).slice_bytes, size_t{64} << 10);
    EXPECT_EQ(params::origin(Id::slice_bytes), params::Origin::environment);
  }
  {
    ScopedEnv env("HOOP_SLICE_BYTES", "");  // empty counts as unset
    EXPECT_EQ(engine::config_from_env(1).slice_bytes, engine::EngineConfig{}.slice_bytes);
    EXPECT_EQ(params::origin(Id::slice_bytes), params::Origin::default_value);
  }
  {
    ScopedEnv env("HOOP_RANK", "3");
    EXPECT_EQ(params::origin(Id::rank), params::Origin::launcher);
    EXPECT_EQ(params::raw("HOOP_RANK"), "3");
  }
  {
    ScopedEnv env("HOOP_ALGO", "ring");
    EXPECT_EQ(params::text_or(Id::algo, ""), "ring");
  }
  EXPECT_EQ(params::text_or(Id::algo, "none"), "none");
}

// A communicator's option beats the environment, which beats the default.
TEST(Params, OptionBeatsEnvironmentBeatsDefault) {
  using namespace std::chrono_literals;
  SpawnOptions opts;
  opts.env = {{"HOOP_TIMEOUT", "0.6"}};
  auto results = run_ranks(1, [](RankContext& ctx) {
    EXPECT_EQ(ctx.make_comm()->timeout(), 600ms);
    CommOptions o;
    o.timeout = 7s;
    EXPECT_EQ(ctx.make_comm(o)->timeout(), 7s);
  }, opts);
  EXPECT_TRUE(all_ok(results));
  results = run_ranks(1, [](RankContext& ctx) {
    ::unsetenv("HOOP_TIMEOUT");
    EXPECT_EQ(ctx.make_comm()->timeout(), 300s);
  });
  EXPECT_TRUE(all_ok(results));
  // A bad value fails the communicator's creation, naming the variable.
  opts.env = {{"HOOP_TIMEOUT", "soon"}};
  results = run_ranks(1, [](RankContext& ctx) {
    try {
      (void)ctx.make_comm();
      ADD_FAILURE() << "HOOP_TIMEOUT=soon was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
      EXPECT_NE(std::string(e.what()).find("HOOP_TIMEOUT"), std::string::npos) << e.what();
    }
  }, opts);
  EXPECT_TRUE(all_ok(results));
}

TEST(Params, UndeclaredNamesAreProgrammingErrors) {
  try {
    (void)params::raw("HOOP_NO_SUCH_VARIABLE");
    ADD_FAILURE() << "an undeclared HOOP_ name was read";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::internal);
  }
  EXPECT_NO_THROW((void)params::raw("RANK"));  // a launcher's own variable
}

// Every HOOP_* name in a string of src/ or tools/ is declared, and none is read around the
// registry (getenv or env::get with a HOOP_ name).
TEST(Params, EveryReadGoesThroughTheRegistry) {
  const std::regex literal(R"re("(?:[^"\\]|\\.)*")re");
  const std::regex name(R"(HOOP_[A-Z0-9_]*[A-Z0-9])");
  const std::regex direct_read(R"re((getenv|env::get\w*)\(\s*"HOOP_)re");
  size_t files = 0;
  for (const char* dir : {"src", "tools"}) {
    for (const auto& entry : fs::recursive_directory_iterator(fs::path(HOOP_SOURCE_DIR) / dir)) {
      const auto ext = entry.path().extension();
      if (!entry.is_regular_file() || (ext != ".cc" && ext != ".h")) continue;
      ++files;
      std::ifstream in(entry.path());
      std::string line;
      for (int number = 1; std::getline(in, line); ++number) {
        const std::string where = fmt::format("{}:{}", entry.path().string(), number);
        EXPECT_FALSE(std::regex_search(line, direct_read)) << where << " reads around the registry";
        for (std::sregex_iterator s(line.begin(), line.end(), literal), end; s != end; ++s) {
          const std::string text = s->str();
          for (std::sregex_iterator n(text.begin(), text.end(), name); n != end; ++n) {
            EXPECT_NE(params::find(n->str()), nullptr) << where << ": " << n->str() << " is not declared";
          }
        }
      }
    }
  }
  EXPECT_GT(files, 100u);
}

TEST(Params, TopoPrintsEveryVariable) {
  ToolProcess topo({HOOP_BIN_DIR "/hoop-topo", "--params"},
                   {"HOOP_SLICE_BYTES=64K", "HOOP_RANK=3", "HOOP_SECRET=sesame", "HOOP_DIRECT_STAGES=99"});
  const auto r = topo.finish();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream out(r.out);
  std::vector<std::string> lines;
  for (std::string line; std::getline(out, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), params::all().size()) << r.out;
  const auto line_of = [&](Id id) { return lines[static_cast<size_t>(id)]; };
  for (const auto& p : params::all()) EXPECT_TRUE(line_of(p.id).starts_with(p.name)) << line_of(p.id);
  EXPECT_NE(line_of(Id::slice_bytes).find("64K"), std::string::npos);
  EXPECT_NE(line_of(Id::slice_bytes).find("environment"), std::string::npos);
  EXPECT_NE(line_of(Id::rank).find("launcher"), std::string::npos);
  EXPECT_NE(line_of(Id::timeout).find("300"), std::string::npos);
  EXPECT_NE(line_of(Id::timeout).find("default"), std::string::npos);
  EXPECT_NE(line_of(Id::direct_stages).find("not accepted"), std::string::npos);
  EXPECT_EQ(r.out.find("sesame"), std::string::npos) << "the secret was printed";
}

}  // namespace
}  // namespace hoop::test
