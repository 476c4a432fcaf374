// Balanced positive/negative sampling (torchvision BalancedPositiveNegativeSampler,
// one image) without host-device synchronisation: every element draws a random key,
// positives sort before negatives, and an element is taken when its rank within
// its group is below the (device-side) number to take. Works on any device.
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <optional>
#include <tuple>

namespace mrcnn::kernels {

std::tuple<at::Tensor, at::Tensor> SampleBalancedMasks(
    const at::Tensor& labels, int64_t batch_size_per_image, double positive_fraction,
    const std::optional<at::Generator>& generator);

}  // namespace mrcnn::kernels
