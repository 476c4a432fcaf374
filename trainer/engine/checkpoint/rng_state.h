#pragma once
// The random generators a training step draws from (CPU default generator, and the
// default CUDA generator of every visible device when CUDA is present), as named tensors
// for checkpoints: "rng/cpu", "rng/cuda/<device>".
#include <ATen/core/Tensor.h>

#include <map>
#include <string>

namespace mrcnn::engine {

std::map<std::string, at::Tensor> CaptureRngState();
// Restores the generators present in `state` (other entries are ignored); a CUDA state
// for a device this process lacks is ignored, so CPU runs resume GPU checkpoints.
void RestoreRngState(const std::map<std::string, at::Tensor>& state);

}  // namespace mrcnn::engine
