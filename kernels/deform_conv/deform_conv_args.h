// Argument checks of the deformable convolution ops, shared by the CPU and CUDA
// registrations so both accept exactly the same arguments and name the same culprit.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/Exception.h>

#include <cstdint>

#include "kernels/deform_conv/deform_conv_sampling.h"

namespace mrcnn::kernels {

// Output size of one axis of a convolution, as torch's conv2d and torchvision compute it.
inline int64_t DeformConvOutputSize(int64_t in, int64_t kernel, int64_t stride, int64_t pad,
                                    int64_t dilation) {
  return (in + 2 * pad - (dilation * (kernel - 1) + 1)) / stride + 1;
}

inline void CheckPair(c10::IntArrayRef v, const char* name, int64_t min_value, const char* op) {
  TORCH_CHECK(v.size() == 2, op, ": ", name, " must have 2 entries (height, width), got ", v);
  TORCH_CHECK(v[0] >= min_value && v[1] >= min_value, op, ": ", name, " must be >= ", min_value,
              ", got ", v);
}

// The layer's own tensors: input B×C_in×H×W, weight C_out×(C_in/groups)×kh×kw, bias C_out.
inline void CheckDeformConvLayer(const at::Tensor& input, const at::Tensor& weight,
                                 const at::Tensor& bias, int64_t groups, int64_t offset_groups,
                                 const char* op) {
  TORCH_CHECK(input.dim() == 4, op, ": input must be B×C_in×H×W, got shape ", input.sizes());
  TORCH_CHECK(weight.dim() == 4, op, ": weight must be C_out×(C_in/groups)×kh×kw, got shape ",
              weight.sizes());
  TORCH_CHECK(input.scalar_type() == at::kFloat || input.scalar_type() == at::kDouble, op,
              ": input must be float32 or float64, got ", input.scalar_type());
  TORCH_CHECK(weight.scalar_type() == input.scalar_type() && weight.device() == input.device(), op,
              ": weight must have input's dtype and device (", input.scalar_type(), ", ",
              input.device(), "), got ", weight.scalar_type(), ", ", weight.device());
  TORCH_CHECK(groups >= 1 && offset_groups >= 1, op,
              ": groups and offset_groups must be >= 1, got ", groups, " and ", offset_groups);
  const int64_t channels = input.size(1);
  TORCH_CHECK(channels % groups == 0 && weight.size(0) % groups == 0, op, ": input channels (",
              channels, ") and weight's output channels (", weight.size(0),
              ") must be divisible by groups (", groups, ")");
  TORCH_CHECK(weight.size(1) * groups == channels, op, ": weight must be C_out×", channels / groups,
              "×kh×kw (C_in/groups = ", channels, "/", groups, "), got shape ", weight.sizes());
  TORCH_CHECK(channels % offset_groups == 0, op, ": input channels (", channels,
              ") must be divisible by offset_groups (", offset_groups, ")");
  TORCH_CHECK(weight.size(2) >= 1 && weight.size(3) >= 1 && weight.size(0) >= 1, op,
              ": weight must have a nonempty kernel and output channels, got shape ",
              weight.sizes());
  if (bias.defined()) {
    TORCH_CHECK(bias.dim() == 1 && bias.size(0) == weight.size(0), op, ": bias must be C_out (",
                weight.size(0), "), got shape ", bias.sizes());
    TORCH_CHECK(bias.scalar_type() == input.scalar_type() && bias.device() == input.device(), op,
                ": bias must have input's dtype and device");
  }
}

// offset B×(2·offset_groups·kh·kw)×out_h×out_w, mask (when defined)
// B×(offset_groups·kh·kw)×out_h×out_w.
inline void CheckDeformConvSampling(const at::Tensor& input, const at::Tensor& offset,
                                    const at::Tensor& mask, const DeformConvShape& s,
                                    const char* op) {
  const int64_t batch = input.size(0);
  TORCH_CHECK(offset.dim() == 4 && offset.size(0) == batch &&
                  offset.size(1) == s.offset_channels() && offset.size(2) == s.out_h &&
                  offset.size(3) == s.out_w,
              op, ": offset must be B×(2·offset_groups·kh·kw)×out_h×out_w = ", batch, "×",
              s.offset_channels(), "×", s.out_h, "×", s.out_w, ", got shape ", offset.sizes());
  TORCH_CHECK(offset.scalar_type() == input.scalar_type() && offset.device() == input.device(), op,
              ": offset must have input's dtype and device");
  if (mask.defined()) {
    TORCH_CHECK(mask.dim() == 4 && mask.size(0) == batch && mask.size(1) == s.mask_channels() &&
                    mask.size(2) == s.out_h && mask.size(3) == s.out_w,
                op, ": mask must be B×(offset_groups·kh·kw)×out_h×out_w = ", batch, "×",
                s.mask_channels(), "×", s.out_h, "×", s.out_w, ", got shape ", mask.sizes());
    TORCH_CHECK(mask.scalar_type() == input.scalar_type() && mask.device() == input.device(), op,
                ": mask must have input's dtype and device");
  }
}

// Every check of deform_conv2d's arguments; returns the geometry the kernels use. An
// undefined mask is DCN v1, an undefined bias no bias.
inline DeformConvShape CheckDeformConvArgs(const at::Tensor& input, const at::Tensor& offset,
                                           const at::Tensor& mask, const at::Tensor& weight,
                                           const at::Tensor& bias, c10::IntArrayRef stride,
                                           c10::IntArrayRef padding, c10::IntArrayRef dilation,
                                           int64_t groups, int64_t offset_groups, const char* op) {
  CheckDeformConvLayer(input, weight, bias, groups, offset_groups, op);
  CheckPair(stride, "stride", 1, op);
  CheckPair(padding, "padding", 0, op);
  CheckPair(dilation, "dilation", 1, op);
  DeformConvShape s{};
  s.channels = input.size(1);
  s.height = input.size(2);
  s.width = input.size(3);
  s.kernel_h = weight.size(2);
  s.kernel_w = weight.size(3);
  s.stride_h = stride[0];
  s.stride_w = stride[1];
  s.pad_h = padding[0];
  s.pad_w = padding[1];
  s.dilation_h = dilation[0];
  s.dilation_w = dilation[1];
  s.offset_groups = offset_groups;
  s.out_h = DeformConvOutputSize(s.height, s.kernel_h, s.stride_h, s.pad_h, s.dilation_h);
  s.out_w = DeformConvOutputSize(s.width, s.kernel_w, s.stride_w, s.pad_w, s.dilation_w);
  TORCH_CHECK(s.channels >= 1 && s.height >= 1 && s.width >= 1, op,
              ": input must have channels and a nonempty map, got shape ", input.sizes());
  TORCH_CHECK(s.out_h >= 1 && s.out_w >= 1, op, ": the output grid would be ", s.out_h, "×",
              s.out_w, " (input ", s.height, "×", s.width, ", kernel ", s.kernel_h, "×", s.kernel_w,
              ", padding ", padding, ", dilation ", dilation, ")");
  CheckDeformConvSampling(input, offset, mask, s, op);
  return s;
}

}  // namespace mrcnn::kernels
