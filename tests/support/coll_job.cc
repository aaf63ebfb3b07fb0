#include "support/coll_job.h"

#include <chrono>
#include <cstdlib>

#include "support/reference.h"
#include "transport/shm/shm_transport.h"

namespace hoop::test {

std::string job_param_name(const ::testing::TestParamInfo<JobParam>& info) {
  return std::string(info.param.transport) + "_n" + std::to_string(info.param.nranks);
}

std::vector<JobParam> job_params() {
  std::vector<JobParam> out;
  for (const char* t : {"shm", "tcp"}) {
    for (int n : {1, 2, 3, 5, 8}) out.push_back({n, t});
  }
  return out;
}

void run_job(const JobParam& p, const std::function<void(RankContext&, Communicator&)>& body,
             const std::vector<std::pair<std::string, std::string>>& env) {
  SpawnOptions opts;
  opts.timeout = std::chrono::seconds(120);
  opts.env = env;
  opts.env.emplace_back("HOOP_TRANSPORT", p.transport);
  auto results = run_ranks(p.nranks, [&](RankContext& ctx) {
    if (!p.hosts.empty()) {
      ::setenv("HOOP_HOST_ID", ("fake-host-" + std::to_string(p.hosts[static_cast<size_t>(ctx.rank)])).c_str(), 1);
    }
    CommOptions copts;
    copts.timeout = std::chrono::seconds(30);
    auto comm = ctx.make_comm(copts);
    ctx.report("JOB " + comm->job_id());
    body(ctx, *comm);
  }, opts);
  EXPECT_TRUE(all_ok(results));
  for (const RankResult& r : results) {
    for (const std::string& line : r.reports) {
      if (line.rfind("JOB ", 0) == 0) {
        transport::shm_remove_job_segments(line.substr(4));
        return;
      }
    }
  }
}

std::string CollCase::describe() const {
  std::string s = std::string(to_string(op)) + " " + (algo.empty() ? "auto" : algo) + " " +
                  std::string(to_string(dt)) + " " + std::string(to_string(redop)) + " count " +
                  std::to_string(count) + " root " + std::to_string(root);
  return s + (spread ? " spread" : "") + (in_place ? " in-place" : "") + (special ? " special values" : "");
}

void run_cases(const JobParam& p, const std::vector<CollCase>& cases,
               const std::function<void(Communicator&, const CollCase&, uint64_t seed)>& run) {
  run_job(p, [&](RankContext&, Communicator& comm) {
    for (size_t i = 0; i < cases.size(); ++i) {
      const CollCase& c = cases[i];
      SCOPED_TRACE("rank " + std::to_string(comm.rank()) + " of " + std::to_string(comm.size()) + ", case " +
                   std::to_string(i) + ": " + c.describe());
      run(comm, c, ref::mix64(i * 7919u + static_cast<uint64_t>(p.nranks)));
      EXPECT_EQ(comm.last_algorithm(), c.algo);
    }
  });
}

std::vector<unsigned char> sentinel_buffer(size_t bytes) {
  std::vector<unsigned char> b(bytes + kGuardBytes);
  ref::fill_sentinel(b.data(), b.size());
  return b;
}

std::string untouched_outside(const unsigned char* buf, size_t size, const schedule::Blocks& blocks, size_t es) {
  std::vector<bool> covered(size, false);
  for (size_t j = 0; j < blocks.counts.size(); ++j) {
    for (size_t b = blocks.displs[j] * es; b < (blocks.displs[j] + blocks.counts[j]) * es && b < size; ++b) {
      covered[b] = true;
    }
  }
  for (size_t b = 0; b < size; ++b) {
    if (!covered[b] && ref::first_non_sentinel(buf + b, 1) == 0) {
      return "byte " + std::to_string(b) + (b >= size - kGuardBytes ? " (past the end)" : " (between blocks)") +
             " was written";
    }
  }
  return "";
}

}  // namespace hoop::test
