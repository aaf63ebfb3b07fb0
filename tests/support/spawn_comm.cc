// The RankContext helpers that need the communicator, apart from spawn.cc so that the process
// spawner links without it.
#include "support/spawn.h"

namespace hoop::test {

InitParams RankContext::init_params() const {
  InitParams p;
  p.rank = rank;
  p.size = size;
  p.store = store();
  p.job_id = job_id;
  return p;
}

std::shared_ptr<Communicator> RankContext::make_comm(CommOptions opts) const {
  return Communicator::create(init_params(), std::move(opts));
}

}  // namespace hoop::test
