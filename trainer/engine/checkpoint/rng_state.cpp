#include "trainer/engine/checkpoint/rng_state.h"

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/core/Generator.h>

#include <mutex>

namespace mrcnn::engine {

std::map<std::string, at::Tensor> CaptureRngState() {
  std::map<std::string, at::Tensor> state;
  auto& ctx = at::globalContext();
  {
    at::Generator gen = ctx.defaultGenerator(at::kCPU);
    std::lock_guard<std::mutex> lock(gen.mutex());
    state["rng/cpu"] = gen.get_state();
  }
  if (ctx.hasCUDA()) {
    const auto devices = static_cast<c10::DeviceIndex>(at::detail::getCUDAHooks().deviceCount());
    for (c10::DeviceIndex d = 0; d < devices; ++d) {
      at::Generator gen = ctx.defaultGenerator(at::Device(at::kCUDA, d));
      std::lock_guard<std::mutex> lock(gen.mutex());
      state["rng/cuda/" + std::to_string(d)] = gen.get_state();
    }
  }
  return state;
}

void RestoreRngState(const std::map<std::string, at::Tensor>& state) {
  auto& ctx = at::globalContext();
  if (auto it = state.find("rng/cpu"); it != state.end()) {
    at::Generator gen = ctx.defaultGenerator(at::kCPU);
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(it->second);
  }
  if (!ctx.hasCUDA()) return;
  const auto devices = static_cast<c10::DeviceIndex>(at::detail::getCUDAHooks().deviceCount());
  for (c10::DeviceIndex d = 0; d < devices; ++d) {
    if (auto it = state.find("rng/cuda/" + std::to_string(d)); it != state.end()) {
      at::Generator gen = ctx.defaultGenerator(at::Device(at::kCUDA, d));
      std::lock_guard<std::mutex> lock(gen.mutex());
      gen.set_state(it->second);
    }
  }
}

}  // namespace mrcnn::engine
