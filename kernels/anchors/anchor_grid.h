// torchvision AnchorGenerator for one image, device-independent (ATen ops on
// `device`), flattened arguments so it fits a torch op schema:
// level l has feature_sizes[2l..2l+1] = (H, W), strides[2l..2l+1] = (sh, sw),
// sizes_per_level[l] consecutive entries of `sizes` and ratios_per_level[l] of
// `aspect_ratios`.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

namespace mrcnn::kernels {

at::Tensor GenerateAnchorGrid(at::IntArrayRef feature_sizes, at::IntArrayRef strides,
                              at::ArrayRef<double> sizes, at::IntArrayRef sizes_per_level,
                              at::ArrayRef<double> aspect_ratios, at::IntArrayRef ratios_per_level,
                              at::Device device);

}  // namespace mrcnn::kernels
