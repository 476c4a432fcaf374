#include "trainer/engine/solver/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "common/config_error.h"
#include "trainer/engine/config/config.h"

namespace mrcnn::engine {

LrSchedule LrSchedule::FromConfig(const TrainConfig& config) {
  using common::ConfigError;
  LrSchedule s;
  const std::string& name = config.GetString("SOLVER.LR_SCHEDULER_NAME");
  if (name == "WarmupMultiStepLR") {
    s.kind = Kind::kMultiStep;
  } else if (name == "WarmupCosineLR") {
    s.kind = Kind::kCosine;
  } else {
    throw ConfigError("config", "SOLVER.LR_SCHEDULER_NAME",
                      "must be WarmupMultiStepLR or WarmupCosineLR, got \"" + name + "\"");
  }
  s.base_lr = config.GetFloat("SOLVER.BASE_LR");
  s.steps = config.GetIntList("SOLVER.STEPS");
  s.gamma = config.GetFloat("SOLVER.GAMMA");
  s.max_iter = config.GetInt("SOLVER.MAX_ITER");
  s.base_lr_end = config.GetFloat("SOLVER.BASE_LR_END");
  s.warmup_factor = config.GetFloat("SOLVER.WARMUP_FACTOR");
  s.warmup_iters = config.GetInt("SOLVER.WARMUP_ITERS");
  const std::string& method = config.GetString("SOLVER.WARMUP_METHOD");
  if (method != "linear" && method != "constant") {
    throw ConfigError("config", "SOLVER.WARMUP_METHOD", "must be linear or constant, got \"" + method + "\"");
  }
  s.warmup_linear = method == "linear";
  if (s.max_iter <= 0) throw ConfigError("config", "SOLVER.MAX_ITER", "must be > 0");
  if (s.warmup_iters < 0) throw ConfigError("config", "SOLVER.WARMUP_ITERS", "must be >= 0");
  if (s.base_lr <= 0) throw ConfigError("config", "SOLVER.BASE_LR", "must be > 0");
  for (size_t i = 0; i < s.steps.size(); ++i) {
    if (s.steps[i] <= 0 || (i > 0 && s.steps[i] <= s.steps[i - 1])) {
      throw ConfigError("config", "SOLVER.STEPS", "must be positive and strictly increasing");
    }
  }
  return s;
}

double LrSchedule::LrAt(int64_t iteration) const {
  double value = base_lr;
  if (kind == Kind::kMultiStep) {
    // Detectron2's bisect_right: the drop applies from the step's own iteration on.
    auto reached = std::upper_bound(steps.begin(), steps.end(), iteration) - steps.begin();
    value = base_lr * std::pow(gamma, static_cast<double>(reached));
  } else {
    double progress = std::clamp(static_cast<double>(iteration) / static_cast<double>(max_iter), 0.0, 1.0);
    value = base_lr_end + 0.5 * (base_lr - base_lr_end) * (1.0 + std::cos(std::numbers::pi * progress));
  }
  if (iteration < warmup_iters) {
    double alpha = static_cast<double>(iteration) / static_cast<double>(warmup_iters);
    double factor = warmup_linear ? warmup_factor * (1.0 - alpha) + alpha : warmup_factor;
    value *= factor;
  }
  return value;
}

}  // namespace mrcnn::engine
