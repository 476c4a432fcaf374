// Runs one of the engine's optimizers (BuildOptimizer, so by SOLVER.OPTIMIZER) over given
// gradients, for the Python oracle test (test_optimizer_oracle.py):
//   optimizer_oracle_tool INPUT.safetensors OUTPUT.safetensors "KEY VALUE ..."
// INPUT: param.<name> (initial values, requires_grad), grad.<step>.<name> (a missing one:
// no gradient that step), lr (one per step), optionally found_inf.<step> (a one-element
// overflow flag: that step runs as Step(found_inf), the device-side skip of fp16 training).
// Halfway, the state goes through State() and LoadState() into a fresh optimizer, as a
// checkpoint resume would. OUTPUT: param.<name>.
#include <torch/torch.h>

#include <cstdio>
#include <exception>
#include <string>

#include "trainer/engine/config/config.h"
#include "trainer/engine/solver/optimizer_registry.h"
#include "trainer/model/safetensors.h"

using namespace mrcnn;

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s INPUT OUTPUT OPTS\n", argv[0]);
    return 2;
  }
  try {
    const model::TensorMap in = model::ReadSafetensors(argv[1]);
    engine::TrainConfig config = engine::TrainConfig::Defaults();
    config.MergeOpts(engine::TrainConfig::SplitOpts(argv[3]));
    engine::NamedParameters params;
    for (const auto& [key, value] : in) {
      if (key.rfind("param.", 0) == 0)
        params.emplace_back(key.substr(6), value.clone().requires_grad_(true));
    }
    const at::Tensor lrs = in.at("lr").to(torch::kDouble).contiguous();
    const int64_t steps = lrs.numel();
    auto optimizer = engine::BuildOptimizer(config, params);
    for (int64_t step = 0; step < steps; ++step) {
      if (step == steps / 2) {  // a resume: state out, a fresh optimizer, state in
        const auto state = optimizer->State();
        optimizer = engine::BuildOptimizer(config, params);
        optimizer->LoadState(state);
      }
      for (auto& [name, p] : params) {
        auto it = in.find("grad." + std::to_string(step) + "." + name);
        p.mutable_grad() = it == in.end() ? at::Tensor() : it->second.clone();
      }
      optimizer->set_lr(lrs[step].item<double>());
      if (auto flag = in.find("found_inf." + std::to_string(step)); flag != in.end())
        optimizer->Step(flag->second);
      else
        optimizer->Step();
      optimizer->ZeroGrad();
    }
    model::TensorMap out;
    for (const auto& [name, p] : params)
      out["param." + name] = p.detach().contiguous();
    model::WriteSafetensors(argv[2], out);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "optimizer_oracle_tool: %s\n", e.what());
    return 1;
  }
}
