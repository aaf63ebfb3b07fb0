// The communicator hoop-bench measures: the world of the launcher that started it (hoop-run,
// torchrun, Slurm, Open MPI, PMI), or a single rank of its own when started directly.
#pragma once

#include <memory>

#include "hoop/communicator.h"
#include "hoop/store.h"

namespace hoop::bench {

struct World {
  std::unique_ptr<TcpStoreServer> own_store;  // serves the single-rank world's rendezvous
  std::shared_ptr<Communicator> comm;
};

World join_world(const CommOptions& opts);

}  // namespace hoop::bench
