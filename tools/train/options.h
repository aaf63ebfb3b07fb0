// hoop-train's command line.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hoop/dp.h"
#include "model/mlp.h"

namespace hoop::train {

struct TrainOptions {
  // --plan: print the ZeRO memory formulas and exit
  bool plan = false;
  double plan_params = 7.5e9;
  int plan_ranks = 64;

  dp::DpConfig dp;
  std::string data = "auto";  // auto | digits | synthetic | <path to digits-style .csv.gz>
  std::vector<int> hidden{512, 512, 512};
  model::Activation activation = model::Activation::relu;
  int steps = 300;
  int batch = 128;  // global batch: the ranks split it
  int print_every = 0;  // 0: about 15 lines
  uint64_t seed = 1;
  std::string save_dir;
  int save_at = 0;  // step after which to save (0: at the end when --save is given)
  std::string load_dir;
  // Elastic training: checkpoints every `checkpoint_every` steps into checkpoint_dir/step-<n>,
  // "latest" names the newest complete one; a (re)started run resumes from it and trains
  // until `steps` steps in all are done.
  std::string checkpoint_dir;
  int checkpoint_every = 0;
  // Fault injection for restart tests: the last rank kills itself after this step, on the
  // first attempt only (HOOP_RESTART_COUNT unset or 0).
  int fail_at_step = 0;
  // With --redundancy 1 the training survives it: --fail-rank (default: the last) dies
  // (SIGKILL) during step --fail-at-step, while its gradients are being reduced, on every
  // attempt; the others recover in memory and go on.
  int fail_rank = -1;
};

// Parses argv; on --help or an error prints and exits.
TrainOptions parse_options(int argc, char** argv);

}  // namespace hoop::train
