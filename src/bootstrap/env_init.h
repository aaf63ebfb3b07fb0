// Where a rank learns who it is and where to meet the others, from the environment of the
// launcher that started it. Sources, first match wins (a family matches when its rank or size
// variable is set):
//   hoop-run:  HOOP_RANK, HOOP_WORLD_SIZE, HOOP_LOCAL_RANK, HOOP_LOCAL_SIZE, HOOP_STORE_ADDR
//              (host:port of the launcher's store), HOOP_JOB_ID
//   torchrun:  RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT
//   Open MPI:  OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK,
//              OMPI_COMM_WORLD_LOCAL_SIZE, OMPI_MCA_ess_base_jobid (+ MASTER_ADDR when the
//              ranks span several hosts: `mpirun -x MASTER_ADDR=<rank 0's host>`)
//   PMI:       PMI_RANK, PMI_SIZE
//   Slurm:     SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_JOB_ID (+ MASTER_ADDR or the
//              first host of SLURM_STEP_NODELIST / SLURM_JOB_NODELIST)
// Slurm comes after the MPI launchers: mpirun inside a Slurm allocation starts its ranks
// through srun'd daemons, so they inherit SLURM_PROCID of the daemon (one per node), not
// their own rank.
// HOOP_STORE_ADDR (host:port, "[v6]:port") names an external store with any source. Without
// it rank 0 serves the store on MASTER_ADDR (default: under Slurm the first node of the step,
// else 127.0.0.1) at HOOP_STORE_PORT, or MASTER_PORT + 1 (torch's own store holds
// MASTER_PORT), or a port derived from the launcher's job number (Slurm: 20000 + (16 x
// SLURM_JOB_ID + SLURM_STEP_ID) mod 10000; Open MPI: 20000 + OMPI_MCA_ess_base_jobid mod
// 10000), or 29411. HOOP_JOB_ID sets the job id with any source; under Slurm it defaults to
// slurm-SLURM_JOB_ID[.SLURM_STEP_ID], under Open MPI to ompi-OMPI_MCA_ess_base_jobid.
#pragma once

#include <cstdint>
#include <string>

namespace hoop::bootstrap {

struct EnvInit {
  int rank = -1;
  int size = -1;
  int local_rank = -1;     // -1: unknown (derived later from host ids)
  int local_size = -1;
  std::string store_host;
  uint16_t store_port = 0;
  bool store_external = false;  // a launcher serves the store; else rank 0 does
  std::string job_id;      // empty: agreed through the store
  std::string source;      // "hoop-run", "torchrun", "slurm", "openmpi", "pmi"
};

// Throws hoop::Error{init} naming the variables that are missing or malformed.
EnvInit read_init_env();

// First host of a Slurm node list: "node[03-05,7],gpu1" -> "node03".
std::string first_slurm_host(const std::string& nodelist);

}  // namespace hoop::bootstrap
