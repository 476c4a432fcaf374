#include "trainer/engine/solver/optimizer_registry.h"

#include <algorithm>
#include <cctype>
#include <utility>

#include "common/config_error.h"
#include "trainer/engine/config/config.h"
#include "trainer/engine/solver/novograd.h"
#include "trainer/engine/solver/sgd.h"

namespace mrcnn::engine {
namespace {

struct Registration {
  const char* name;
  OptimizerFactory make;
};

const std::vector<Registration>& Table() {
  static const std::vector<Registration> table = {
      {"SGD",
       [](const NamedParameters& p, const TrainConfig& c) -> std::unique_ptr<Optimizer> {
         return std::make_unique<Sgd>(p, SgdOptions::FromConfig(c));
       }},
      {"NovoGrad",
       [](const NamedParameters& p, const TrainConfig& c) -> std::unique_ptr<Optimizer> {
         return std::make_unique<NovoGrad>(p, NovoGradOptions::FromConfig(c));
       }},
  };
  return table;
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

}  // namespace

std::vector<std::string> OptimizerNames() {
  std::vector<std::string> names;
  for (const auto& r : Table())
    names.emplace_back(r.name);
  return names;
}

std::unique_ptr<Optimizer> BuildOptimizer(const TrainConfig& config,
                                          const NamedParameters& parameters) {
  const std::string& wanted = config.GetString("SOLVER.OPTIMIZER");
  for (const auto& r : Table()) {
    if (Lower(r.name) == Lower(wanted))
      return r.make(parameters, config);
  }
  std::string known;
  for (const auto& n : OptimizerNames())
    known += (known.empty() ? "" : ", ") + n;
  throw common::ConfigError(
      "config", "SOLVER.OPTIMIZER",
      "is \"" + wanted + "\", which is not an optimizer here: use one of " + known);
}

}  // namespace mrcnn::engine
