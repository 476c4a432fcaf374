#pragma once
// Learning-rate schedules with Detectron2's semantics (solver/build.py build_lr_scheduler on
// fvcore's parameter schedulers): a main multiplier (multistep, cosine, or step with a fixed
// gamma) of the training fraction t / MAX_ITER, with a warmup segment over the first
// WARMUP_ITERS iterations that goes linearly from WARMUP_FACTOR x main(0) to main at the
// warmup's end ("linear"), or stays at WARMUP_FACTOR x main(0) ("constant"). fvcore's 1e-6
// tolerance on the fraction is kept, so the iteration a step or the warmup's end takes effect
// is Detectron2's. The schedule is a pure function of the iteration, so resuming needs only
// the iteration. Torch-free.
#include <cstdint>
#include <string>
#include <vector>

namespace mrcnn::engine {

class TrainConfig;

struct LrSchedule {
  enum class Kind { kMultiStep, kCosine, kStepWithFixedGamma };
  Kind kind = Kind::kMultiStep;
  double base_lr = 0.02;
  // multistep: lr *= gamma from each step on; steps beyond max_iter are dropped (as Detectron2
  // drops them, with a warning there).
  std::vector<int64_t> steps;
  double gamma = 0.1;
  int64_t num_decays = 3;  // step with fixed gamma: max_iter split into num_decays + 1 equal parts
  int64_t max_iter = 90000;
  double base_lr_end = 0.0;  // cosine: value at max_iter
  double warmup_factor = 1e-3;
  int64_t warmup_iters = 1000;
  bool warmup_linear = true;
  // SOLVER.RESCALE_INTERVAL: the main schedule runs over the iterations after the warmup
  // (its fraction rescaled to them) instead of over the whole training.
  bool rescale_interval = false;

  // From SOLVER.*; throws common::ConfigError naming the key on an unknown scheduler or
  // warmup method, non-increasing STEPS, a non-positive MAX_ITER or BASE_LR, or a cosine
  // BASE_LR_END outside [0, BASE_LR].
  static LrSchedule FromConfig(const TrainConfig& config);

  // The learning rate for the update made at iteration `iteration` (0-based).
  double LrAt(int64_t iteration) const;

 private:
  // The main schedule's multiplier at training fraction `where` in [0, 1].
  double MainMultiplier(double where) const;
};

}  // namespace mrcnn::engine
