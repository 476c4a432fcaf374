#include "trainer/engine/solver/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "common/config_error.h"
#include "trainer/engine/config/config.h"

namespace mrcnn::engine {
namespace {

// fvcore's ParamScheduler.WHERE_EPSILON: fractions are compared and floored with it, so that
// t / MAX_ITER * MAX_ITER lands on t.
constexpr double kWhereEpsilon = 1e-6;

}  // namespace

LrSchedule LrSchedule::FromConfig(const TrainConfig& config) {
  using common::ConfigError;
  LrSchedule s;
  const std::string& name = config.GetString("SOLVER.LR_SCHEDULER_NAME");
  if (name == "WarmupMultiStepLR") {
    s.kind = Kind::kMultiStep;
  } else if (name == "WarmupCosineLR") {
    s.kind = Kind::kCosine;
  } else if (name == "WarmupStepWithFixedGammaLR") {
    s.kind = Kind::kStepWithFixedGamma;
  } else {
    throw ConfigError(
        "config", "SOLVER.LR_SCHEDULER_NAME",
        "must be WarmupMultiStepLR, WarmupCosineLR or WarmupStepWithFixedGammaLR, got \"" + name +
            "\"");
  }
  s.base_lr = config.GetFloat("SOLVER.BASE_LR");
  s.steps = config.GetIntList("SOLVER.STEPS");
  s.gamma = config.GetFloat("SOLVER.GAMMA");
  s.num_decays = config.GetInt("SOLVER.NUM_DECAYS");
  s.max_iter = config.GetInt("SOLVER.MAX_ITER");
  s.base_lr_end = config.GetFloat("SOLVER.BASE_LR_END");
  s.warmup_factor = config.GetFloat("SOLVER.WARMUP_FACTOR");
  s.warmup_iters = config.GetInt("SOLVER.WARMUP_ITERS");
  s.rescale_interval = config.GetBool("SOLVER.RESCALE_INTERVAL");
  const std::string& method = config.GetString("SOLVER.WARMUP_METHOD");
  if (method != "linear" && method != "constant") {
    throw ConfigError("config", "SOLVER.WARMUP_METHOD",
                      "must be linear or constant, got \"" + method + "\"");
  }
  s.warmup_linear = method == "linear";
  if (s.max_iter <= 0)
    throw ConfigError("config", "SOLVER.MAX_ITER", "must be > 0");
  if (s.warmup_iters < 0)
    throw ConfigError("config", "SOLVER.WARMUP_ITERS", "must be >= 0");
  if (s.base_lr <= 0)
    throw ConfigError("config", "SOLVER.BASE_LR", "must be > 0");
  if (s.num_decays < 0)
    throw ConfigError("config", "SOLVER.NUM_DECAYS", "must be >= 0");
  if (s.kind == Kind::kCosine && (s.base_lr_end < 0 || s.base_lr_end > s.base_lr)) {
    throw ConfigError("config", "SOLVER.BASE_LR_END",
                      "must be in [0, SOLVER.BASE_LR] for WarmupCosineLR");
  }
  for (size_t i = 0; i < s.steps.size(); ++i) {
    if (s.steps[i] <= 0 || (i > 0 && s.steps[i] <= s.steps[i - 1])) {
      throw ConfigError("config", "SOLVER.STEPS", "must be positive and strictly increasing");
    }
  }
  std::erase_if(s.steps, [&](int64_t step) { return step > s.max_iter; });
  return s;
}

double LrSchedule::MainMultiplier(double where) const {
  switch (kind) {
    case Kind::kMultiStep: {
      // fvcore's MultiStepParamScheduler: the iteration floored from the fraction, then
      // bisect_right, so a step's drop applies from the step's own iteration on.
      const auto iteration =
          static_cast<int64_t>((where + kWhereEpsilon) * static_cast<double>(max_iter));
      const auto reached = std::upper_bound(steps.begin(), steps.end(), iteration) - steps.begin();
      return std::pow(gamma, static_cast<double>(reached));
    }
    case Kind::kCosine: {
      const double end = base_lr_end / base_lr;
      return end + 0.5 * (1.0 - end) * (1.0 + std::cos(std::numbers::pi * where));
    }
    case Kind::kStepWithFixedGamma: {
      const auto parts = num_decays + 1;
      const auto part = std::min<int64_t>(
          static_cast<int64_t>((where + kWhereEpsilon) * static_cast<double>(parts)), parts - 1);
      return std::pow(gamma, static_cast<double>(part));
    }
  }
  return 1.0;
}

double LrSchedule::LrAt(int64_t iteration) const {
  const double where = static_cast<double>(iteration) / static_cast<double>(max_iter);
  const double warmup_length =
      std::min(static_cast<double>(warmup_iters) / static_cast<double>(max_iter), 1.0);
  double multiplier;
  if (where + kWhereEpsilon > warmup_length) {
    const double main_where =
        rescale_interval ? (where - warmup_length) / (1.0 - warmup_length) : where;
    multiplier = MainMultiplier(std::min(main_where, 1.0));
  } else {
    // The warmup ends where the main schedule is at the end of the warmup (at its start
    // with RESCALE_INTERVAL): a multistep drop inside the warmup is already in its target.
    const double start = warmup_factor * MainMultiplier(0.0);
    const double end = MainMultiplier(rescale_interval ? 0.0 : warmup_length);
    const double alpha = where / warmup_length;
    multiplier = warmup_linear ? end * alpha + start * (1.0 - alpha) : start;
  }
  return base_lr * multiplier;
}

}  // namespace mrcnn::engine
