#include "trainer/engine/solver/reference_world_size.h"

#include <cmath>
#include <sstream>

#include "common/config_error.h"
#include "trainer/engine/config/config.h"

namespace mrcnn::engine {
namespace {

// Python's int(round(x)): to the nearest integer, ties to even (the default rounding mode).
int64_t RoundHalfEven(double x) {
  return static_cast<int64_t>(std::nearbyint(x));
}

}  // namespace

std::string ScaleToReferenceWorldSize(TrainConfig& config, int64_t world_size) {
  const int64_t reference = config.GetInt("SOLVER.REFERENCE_WORLD_SIZE");
  if (reference < 0)
    throw common::ConfigError("config", "SOLVER.REFERENCE_WORLD_SIZE", "must be >= 0 (0: off)");
  if (reference == 0 || reference == world_size)
    return "";
  const int64_t batch = config.GetInt("SOLVER.IMS_PER_BATCH");
  if (batch % reference != 0) {
    throw common::ConfigError("config", "SOLVER.REFERENCE_WORLD_SIZE",
                              "(" + std::to_string(reference) +
                                  ") must divide SOLVER.IMS_PER_BATCH (" + std::to_string(batch) +
                                  ")");
  }
  const double scale = static_cast<double>(world_size) / static_cast<double>(reference);
  const auto scaled = [&](const char* key) {
    config.Set(key, ConfigValue{RoundHalfEven(static_cast<double>(config.GetInt(key)) / scale)},
               "REFERENCE_WORLD_SIZE");
  };
  config.Set("SOLVER.IMS_PER_BATCH", ConfigValue{RoundHalfEven(static_cast<double>(batch) * scale)},
             "REFERENCE_WORLD_SIZE");
  config.Set("SOLVER.BASE_LR", ConfigValue{config.GetFloat("SOLVER.BASE_LR") * scale},
             "REFERENCE_WORLD_SIZE");
  for (const char* key :
       {"SOLVER.MAX_ITER", "SOLVER.WARMUP_ITERS", "TEST.EVAL_PERIOD", "SOLVER.CHECKPOINT_PERIOD"})
    scaled(key);
  IntList steps;
  for (int64_t step : config.GetIntList("SOLVER.STEPS"))
    steps.push_back(RoundHalfEven(static_cast<double>(step) / scale));
  config.Set("SOLVER.STEPS", ConfigValue{steps}, "REFERENCE_WORLD_SIZE");
  config.Set("SOLVER.REFERENCE_WORLD_SIZE", ConfigValue{world_size}, "REFERENCE_WORLD_SIZE");
  std::ostringstream line;
  line << "SOLVER.REFERENCE_WORLD_SIZE " << reference << " -> " << world_size
       << " processes: IMS_PER_BATCH " << config.GetInt("SOLVER.IMS_PER_BATCH") << ", BASE_LR "
       << config.GetFloat("SOLVER.BASE_LR") << ", MAX_ITER " << config.GetInt("SOLVER.MAX_ITER")
       << ", WARMUP_ITERS " << config.GetInt("SOLVER.WARMUP_ITERS");
  return line.str();
}

}  // namespace mrcnn::engine
