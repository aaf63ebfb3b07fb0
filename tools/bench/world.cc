#include "world.h"

#include <unistd.h>

#include <cstdlib>
#include <string>

#include "core/params.h"

namespace hoop::bench {

namespace {

// A launcher tells each rank its number and the world's size; without any of these variables
// (those Communicator::from_env reads, see bootstrap/env_init.h) the process runs alone. With
// only some of them, from_env reports what is missing.
bool started_by_a_launcher() {
  for (const char* name : {"HOOP_RANK", "HOOP_WORLD_SIZE", "RANK", "WORLD_SIZE",
                           "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE",
                           "SLURM_PROCID", "SLURM_NTASKS"}) {
    if (params::raw(std::string_view(name))) return true;
  }
  return false;
}

}  // namespace

World join_world(const CommOptions& opts) {
  World world;
  if (started_by_a_launcher()) {
    world.comm = Communicator::from_env(opts);
    return world;
  }
  world.own_store = std::make_unique<TcpStoreServer>("127.0.0.1", 0);
  InitParams params;
  params.rank = 0;
  params.size = 1;
  params.local_rank = 0;
  params.store = connect_tcp_store("127.0.0.1", world.own_store->port());
  params.job_id = "hoop-bench-" + std::to_string(::getpid());
  world.comm = Communicator::create(params, opts);
  return world;
}

}  // namespace hoop::bench
