// Init from the environment of each launcher family, and Slurm node lists.
#include <cstdlib>
#include <map>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "bootstrap/env_init.h"
#include "hoop/error.h"

namespace hoop::bootstrap {
namespace {

// Every variable read_init_env looks at: cleared for each test, restored afterwards.
const char* const kVars[] = {
    "HOOP_RANK", "HOOP_WORLD_SIZE", "HOOP_LOCAL_RANK", "HOOP_LOCAL_SIZE", "HOOP_STORE_ADDR",
    "HOOP_STORE_PORT", "HOOP_JOB_ID", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
    "MASTER_ADDR", "MASTER_PORT", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_JOB_ID",
    "SLURM_STEP_ID", "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
    "OMPI_MCA_ess_base_jobid", "PMI_RANK", "PMI_SIZE"};

class EnvInitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : kVars) {
      if (const char* v = std::getenv(name)) saved_[name] = v;
      ::unsetenv(name);
    }
  }
  void TearDown() override {
    for (const char* name : kVars) {
      auto it = saved_.find(name);
      if (it != saved_.end()) {
        ::setenv(name, it->second.c_str(), 1);
      } else {
        ::unsetenv(name);
      }
    }
  }
  static void set(const std::map<std::string, std::string>& vars) {
    for (const auto& [k, v] : vars) ::setenv(k.c_str(), v.c_str(), 1);
  }
  // The init error's message (failing the test when there is none).
  static std::string init_error() {
    try {
      read_init_env();
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::init) << e.what();
      return e.what();
    }
    ADD_FAILURE() << "read_init_env() did not fail";
    return {};
  }

 private:
  std::map<std::string, std::string> saved_;
};

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST_F(EnvInitTest, HoopRunWithItsStore) {
  set({{"HOOP_RANK", "2"}, {"HOOP_WORLD_SIZE", "4"}, {"HOOP_LOCAL_RANK", "0"},
       {"HOOP_LOCAL_SIZE", "2"}, {"HOOP_STORE_ADDR", "127.0.0.1:40123"}, {"HOOP_JOB_ID", "job7"}});
  EnvInit e = read_init_env();
  EXPECT_EQ(e.source, "hoop-run");
  EXPECT_EQ(e.rank, 2);
  EXPECT_EQ(e.size, 4);
  EXPECT_EQ(e.local_rank, 0);
  EXPECT_EQ(e.local_size, 2);
  EXPECT_EQ(e.store_host, "127.0.0.1");
  EXPECT_EQ(e.store_port, 40123);
  EXPECT_TRUE(e.store_external);
  EXPECT_EQ(e.job_id, "job7");

  set({{"HOOP_STORE_ADDR", "[::1]:40124"}});
  e = read_init_env();
  EXPECT_EQ(e.store_host, "::1");
  EXPECT_EQ(e.store_port, 40124);
}

TEST_F(EnvInitTest, HoopRunWithoutStoreAddressUsesRankZerosStore) {
  set({{"HOOP_RANK", "0"}, {"HOOP_WORLD_SIZE", "1"}});
  EnvInit e = read_init_env();
  EXPECT_EQ(e.rank, 0);
  EXPECT_EQ(e.size, 1);
  EXPECT_EQ(e.local_rank, -1);
  EXPECT_EQ(e.local_size, -1);
  EXPECT_FALSE(e.store_external);
  EXPECT_EQ(e.store_host, "127.0.0.1");
  EXPECT_EQ(e.store_port, 29411);
  EXPECT_EQ(e.job_id, "");
}

TEST_F(EnvInitTest, Torchrun) {
  set({{"RANK", "3"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "4"},
       {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}});
  EnvInit e = read_init_env();
  EXPECT_EQ(e.source, "torchrun");
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.size, 8);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.local_size, 4);
  EXPECT_EQ(e.store_host, "127.0.0.1");
  EXPECT_EQ(e.store_port, 29501);  // torch's own store holds MASTER_PORT
  EXPECT_FALSE(e.store_external);

  set({{"HOOP_STORE_PORT", "31000"}});
  EXPECT_EQ(read_init_env().store_port, 31000);
}

TEST_F(EnvInitTest, Slurm) {
  set({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "6"}, {"SLURM_LOCALID", "1"},
       {"SLURM_JOB_ID", "1234"}, {"SLURM_STEP_ID", "0"},
       {"SLURM_STEP_NODELIST", "node[03-05,7],gpu1"}, {"SLURM_JOB_NODELIST", "other[1-9]"}});
  EnvInit e = read_init_env();
  EXPECT_EQ(e.source, "slurm");
  EXPECT_EQ(e.rank, 5);
  EXPECT_EQ(e.size, 6);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.local_size, -1);
  EXPECT_EQ(e.store_host, "node03");
  EXPECT_EQ(e.store_port, 20000 + (1234 * 16 + 0) % 10000);  // from the job and step
  EXPECT_EQ(e.job_id, "slurm-1234.0");
  set({{"SLURM_STEP_ID", "1"}});
  EXPECT_EQ(read_init_env().store_port, 20000 + (1234 * 16 + 1) % 10000);  // another step
  set({{"SLURM_STEP_ID", "0"}});

  ::unsetenv("SLURM_STEP_NODELIST");
  EXPECT_EQ(read_init_env().store_host, "other1");
  set({{"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "2000"}});
  e = read_init_env();
  EXPECT_EQ(e.store_host, "127.0.0.1");
  EXPECT_EQ(e.store_port, 2001);
  set({{"HOOP_JOB_ID", "mine"}});
  EXPECT_EQ(read_init_env().job_id, "mine");
}

TEST_F(EnvInitTest, OpenMpi) {
  set({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"},
       {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
  EnvInit e = read_init_env();
  EXPECT_EQ(e.source, "openmpi");
  EXPECT_EQ(e.rank, 1);
  EXPECT_EQ(e.size, 2);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.local_size, 2);
  EXPECT_EQ(e.store_host, "127.0.0.1");
  EXPECT_EQ(e.store_port, 29411);
  EXPECT_EQ(e.job_id, "");

  // mpirun's job number gives the job id and the store's port: two mpiruns on one host meet
  // each their own store.
  set({{"OMPI_MCA_ess_base_jobid", "652541953"}});
  e = read_init_env();
  EXPECT_EQ(e.job_id, "ompi-652541953");
  EXPECT_EQ(e.store_port, 20000 + 652541953 % 10000);
  set({{"MASTER_PORT", "2000"}});
  EXPECT_EQ(read_init_env().store_port, 2001);
  ::unsetenv("MASTER_PORT");

  // Ranks on several hosts cannot meet on loopback: the error says what to set.
  set({{"OMPI_COMM_WORLD_SIZE", "4"}});
  EXPECT_TRUE(contains(init_error(), "MASTER_ADDR"));
  set({{"MASTER_ADDR", "127.0.0.1"}});
  EXPECT_EQ(read_init_env().size, 4);
}

TEST_F(EnvInitTest, Pmi) {
  set({{"PMI_RANK", "0"}, {"PMI_SIZE", "3"}});
  EnvInit e = read_init_env();
  EXPECT_EQ(e.source, "pmi");
  EXPECT_EQ(e.rank, 0);
  EXPECT_EQ(e.size, 3);
  EXPECT_EQ(e.local_rank, -1);
}

TEST_F(EnvInitTest, TheInnermostLauncherWins) {
  // Slurm's variables are inherited by everything started inside an allocation.
  set({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}});
  set({{"PMI_RANK", "3"}, {"PMI_SIZE", "4"}});
  EXPECT_EQ(read_init_env().source, "pmi");
  set({{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "4"}});
  EXPECT_EQ(read_init_env().source, "openmpi");
  EXPECT_EQ(read_init_env().rank, 2);
  set({{"RANK", "1"}, {"WORLD_SIZE", "4"}});
  EXPECT_EQ(read_init_env().source, "torchrun");
  set({{"HOOP_RANK", "0"}, {"HOOP_WORLD_SIZE", "4"}});
  EXPECT_EQ(read_init_env().source, "hoop-run");
}

TEST_F(EnvInitTest, ErrorsNameTheVariables) {
  std::string what = init_error();
  EXPECT_TRUE(contains(what, "HOOP_RANK")) << what;
  EXPECT_TRUE(contains(what, "RANK+WORLD_SIZE")) << what;
  EXPECT_TRUE(contains(what, "SLURM_PROCID")) << what;
  EXPECT_TRUE(contains(what, "OMPI_COMM_WORLD_RANK")) << what;
  EXPECT_TRUE(contains(what, "PMI_RANK")) << what;

  set({{"HOOP_RANK", "1"}});
  what = init_error();
  EXPECT_TRUE(contains(what, "HOOP_WORLD_SIZE is not set")) << what;

  set({{"HOOP_WORLD_SIZE", "1"}});
  what = init_error();
  EXPECT_TRUE(contains(what, "HOOP_RANK=1 is not below HOOP_WORLD_SIZE=1")) << what;

  ::unsetenv("HOOP_RANK");
  ::unsetenv("HOOP_WORLD_SIZE");
  set({{"RANK", "abc"}, {"WORLD_SIZE", "2"}});
  what = init_error();
  EXPECT_TRUE(contains(what, "RANK='abc'")) << what;

  set({{"RANK", "0"}, {"LOCAL_RANK", "2"}, {"LOCAL_WORLD_SIZE", "2"}});
  what = init_error();
  EXPECT_TRUE(contains(what, "LOCAL_RANK=2 is not below LOCAL_WORLD_SIZE=2")) << what;
  ::unsetenv("LOCAL_RANK");
  ::unsetenv("LOCAL_WORLD_SIZE");

  set({{"HOOP_STORE_ADDR", "no-port"}});
  EXPECT_TRUE(contains(init_error(), "HOOP_STORE_ADDR='no-port'"));
  set({{"HOOP_STORE_ADDR", "::1:5000"}});
  EXPECT_TRUE(contains(init_error(), "[address]:port"));
  set({{"HOOP_STORE_ADDR", "127.0.0.1:99999"}});
  EXPECT_TRUE(contains(init_error(), "99999"));
  ::unsetenv("HOOP_STORE_ADDR");

  set({{"MASTER_PORT", "65535"}});
  EXPECT_TRUE(contains(init_error(), "MASTER_PORT"));
  set({{"MASTER_PORT", "port"}});
  EXPECT_TRUE(contains(init_error(), "MASTER_PORT='port'"));
}

TEST(SlurmNodeList, FirstHost) {
  EXPECT_EQ(first_slurm_host("node[03-05,7],gpu1"), "node03");
  EXPECT_EQ(first_slurm_host("host1"), "host1");
  EXPECT_EQ(first_slurm_host("host1,host2"), "host1");
  EXPECT_EQ(first_slurm_host("gpu[7]"), "gpu7");
  EXPECT_EQ(first_slurm_host("gpu[12,3-4]"), "gpu12");
  EXPECT_EQ(first_slurm_host("rack[2-3]-n[08-09]"), "rack2-n08");
  EXPECT_EQ(first_slurm_host("a.b-c[1-2].example"), "a.b-c1.example");
  EXPECT_EQ(first_slurm_host(""), "");
  EXPECT_THROW(first_slurm_host("node[1-2"), Error);
  EXPECT_THROW(first_slurm_host("node[a-b]"), Error);
  EXPECT_THROW(first_slurm_host("node]"), Error);
}

}  // namespace
}  // namespace hoop::bootstrap
