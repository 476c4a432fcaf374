#pragma once
// Learning-rate schedules with Detectron2's semantics: a main schedule (multistep or
// cosine) times a warmup factor that rises from WARMUP_FACTOR to 1 over WARMUP_ITERS
// iterations ("linear") or stays at WARMUP_FACTOR until then ("constant"). The schedule is
// a pure function of the iteration, so resuming needs only the iteration. Torch-free.
#include <cstdint>
#include <string>
#include <vector>

namespace mrcnn::engine {

class TrainConfig;

struct LrSchedule {
  enum class Kind { kMultiStep, kCosine };
  Kind kind = Kind::kMultiStep;
  double base_lr = 0.02;
  std::vector<int64_t> steps;  // multistep: lr *= gamma at each step reached
  double gamma = 0.1;
  int64_t max_iter = 90000;
  double base_lr_end = 0.0;  // cosine: value at max_iter
  double warmup_factor = 1e-3;
  int64_t warmup_iters = 1000;
  bool warmup_linear = true;

  // From SOLVER.*; throws common::ConfigError naming the key on an unknown scheduler or
  // warmup method, non-increasing STEPS, or a non-positive MAX_ITER.
  static LrSchedule FromConfig(const TrainConfig& config);

  // The learning rate for the update made at iteration `iteration` (0-based).
  double LrAt(int64_t iteration) const;
};

}  // namespace mrcnn::engine
