#pragma once
// Optimizers by name, for SOLVER.OPTIMIZER. Adding one is one row in the table of
// optimizer_registry.cpp: its name and a factory from (parameters, config).
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "trainer/engine/solver/optimizer.h"

namespace mrcnn::engine {

class TrainConfig;

using OptimizerFactory =
    std::function<std::unique_ptr<Optimizer>(const NamedParameters&, const TrainConfig&)>;

// The registered names, in table order (for error messages and docs).
std::vector<std::string> OptimizerNames();

// The optimizer named by SOLVER.OPTIMIZER (case-insensitive) over `parameters`; a
// common::ConfigError naming the key and the known names otherwise.
std::unique_ptr<Optimizer> BuildOptimizer(const TrainConfig& config,
                                          const NamedParameters& parameters);

}  // namespace mrcnn::engine
