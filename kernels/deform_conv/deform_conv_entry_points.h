// The two registered deformable convolution ops (mrcnn::deform_conv2d and
// mrcnn::_deform_conv2d_backward) as one im2col + GEMM driver over a device's three
// sampling kernels, so the CPU and CUDA files register the same schema the same way:
// DeformConvOps<&Im2ColCpu, &Col2ImCpu, &OffsetMaskGradCpu>::Forward etc.
//
// Columns layout (what the kernels read and write): a (C_in·kh·kw) × (n·out_h·out_w) matrix
// for n images, row c·kh·kw + tap, column b·out_h·out_w + oh·out_w + ow. The rows of one
// convolution group are contiguous, so each group is one matrix of a batched GEMM with the
// weight viewed as groups × (C_out/groups) × (C_in/groups·kh·kw). Images go through in
// chunks whose columns stay under kDeformColumnElements, which bounds the extra memory
// without changing the result (only the order of the weight gradient's sums).
#pragma once

#include <ATen/ATen.h>
#include <c10/util/ArrayRef.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <tuple>
#include <utility>

#include "kernels/deform_conv/deform_conv_args.h"
#include "kernels/deform_conv/deform_conv_sampling.h"

namespace mrcnn::kernels {

// The device kernels, each over the n images of contiguous chunk tensors (input n×C×H×W,
// offset n×(2·G·K)×out_h×out_w, mask n×(G·K)×out_h×out_w or undefined for v1):
// Im2Col returns the columns (sample · mask) of those images.
using DeformIm2ColImpl = at::Tensor (*)(const at::Tensor& input, const at::Tensor& offset,
                                        const at::Tensor& mask, const DeformConvShape& shape);
// Col2Im adds the columns' gradient, scattered through the bilinear weights, into
// grad_input (n×C×H×W, contiguous, zeroed by the caller).
using DeformCol2ImImpl = void (*)(const at::Tensor& grad_columns, const at::Tensor& offset,
                                  const at::Tensor& mask, const DeformConvShape& shape,
                                  at::Tensor& grad_input);
// OffsetMaskGrad writes every element of grad_offset (like offset) and, for v2, grad_mask
// (like mask): sums over the channels of each deformable group.
using DeformOffsetMaskGradImpl = void (*)(const at::Tensor& grad_columns, const at::Tensor& input,
                                          const at::Tensor& offset, const at::Tensor& mask,
                                          const DeformConvShape& shape, at::Tensor& grad_offset,
                                          at::Tensor& grad_mask);

// 2^26 column elements: 256 MiB in float32 per chunk.
inline constexpr int64_t kDeformColumnElements = int64_t{1} << 26;

inline int64_t DeformBatchChunk(const DeformConvShape& s, int64_t batch) {
  const int64_t per_image = s.channels * s.taps() * s.out_pixels();
  return std::clamp<int64_t>(kDeformColumnElements / std::max<int64_t>(per_image, 1), 1,
                             std::max<int64_t>(batch, 1));
}

inline at::Tensor NarrowOrUndefined(const at::Tensor& t, int64_t start, int64_t length) {
  return t.defined() ? t.narrow(0, start, length) : t;
}

template <DeformIm2ColImpl Im2Col, DeformCol2ImImpl Col2Im, DeformOffsetMaskGradImpl OffsetMaskGrad>
struct DeformConvOps {
  static at::Tensor Forward(const at::Tensor& input_in, const at::Tensor& offset_in,
                            const std::optional<at::Tensor>& mask_in, const at::Tensor& weight_in,
                            const std::optional<at::Tensor>& bias_in, c10::IntArrayRef stride,
                            c10::IntArrayRef padding, c10::IntArrayRef dilation, int64_t groups,
                            int64_t offset_groups) {
    const at::Tensor mask_arg = mask_in.value_or(at::Tensor());
    const at::Tensor bias = bias_in.value_or(at::Tensor());
    const DeformConvShape s =
        CheckDeformConvArgs(input_in, offset_in, mask_arg, weight_in, bias, stride, padding,
                            dilation, groups, offset_groups, "mrcnn::deform_conv2d");
    const at::Tensor input = input_in.contiguous(), offset = offset_in.contiguous();
    const at::Tensor mask = mask_arg.defined() ? mask_arg.contiguous() : mask_arg;
    const int64_t batch = input.size(0), out_channels = weight_in.size(0);
    const at::Tensor weight = weight_in.contiguous().view({groups, out_channels / groups, -1});
    at::Tensor out = at::empty({batch, out_channels, s.out_h, s.out_w}, input.options());
    const int64_t chunk = DeformBatchChunk(s, batch);
    for (int64_t b0 = 0; b0 < batch; b0 += chunk) {
      const int64_t n = std::min(chunk, batch - b0);
      const at::Tensor columns = Im2Col(input.narrow(0, b0, n), offset.narrow(0, b0, n),
                                        NarrowOrUndefined(mask, b0, n), s);
      const at::Tensor product =
          at::bmm(weight, columns.view({groups, -1, n * s.out_pixels()}));  // G × C_out/G × n·HW
      out.narrow(0, b0, n).copy_(
          product.view({out_channels, n, s.out_h, s.out_w}).permute({1, 0, 2, 3}));
    }
    if (bias.defined()) {
      out.add_(bias.view({1, -1, 1, 1}));
    }
    return out;
  }

  // (grad_input, grad_offset, grad_mask, grad_weight, grad_bias); grad_mask undefined for v1,
  // grad_bias undefined unless bias_grad.
  static std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> Backward(
      const at::Tensor& grad_in, const at::Tensor& input_in, const at::Tensor& offset_in,
      const std::optional<at::Tensor>& mask_in, const at::Tensor& weight_in,
      c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef dilation, int64_t groups,
      int64_t offset_groups, bool bias_grad) {
    const char* op = "mrcnn::_deform_conv2d_backward";
    const at::Tensor mask_arg = mask_in.value_or(at::Tensor());
    const DeformConvShape s =
        CheckDeformConvArgs(input_in, offset_in, mask_arg, weight_in, at::Tensor(), stride, padding,
                            dilation, groups, offset_groups, op);
    const int64_t batch = input_in.size(0), out_channels = weight_in.size(0);
    TORCH_CHECK(grad_in.dim() == 4 && grad_in.size(0) == batch && grad_in.size(1) == out_channels &&
                    grad_in.size(2) == s.out_h && grad_in.size(3) == s.out_w &&
                    grad_in.scalar_type() == input_in.scalar_type(),
                op, ": grad must be the output's shape ", batch, "×", out_channels, "×", s.out_h,
                "×", s.out_w, " and dtype, got ", grad_in.sizes(), " ", grad_in.scalar_type());
    const at::Tensor grad = grad_in.contiguous(), input = input_in.contiguous();
    const at::Tensor offset = offset_in.contiguous();
    const at::Tensor mask = mask_arg.defined() ? mask_arg.contiguous() : mask_arg;
    const at::Tensor weight = weight_in.contiguous().view({groups, out_channels / groups, -1});
    const at::Tensor weight_t = weight.transpose(1, 2);
    at::Tensor grad_input = at::zeros_like(input);
    at::Tensor grad_offset = at::empty_like(offset);
    at::Tensor grad_mask = mask.defined() ? at::empty_like(mask) : at::Tensor();
    at::Tensor grad_weight = at::zeros_like(weight);
    const int64_t chunk = DeformBatchChunk(s, batch), pixels = s.out_pixels();
    for (int64_t b0 = 0; b0 < batch; b0 += chunk) {
      const int64_t n = std::min(chunk, batch - b0);
      const at::Tensor input_n = input.narrow(0, b0, n), offset_n = offset.narrow(0, b0, n);
      const at::Tensor mask_n = NarrowOrUndefined(mask, b0, n);
      // The output gradient in the columns' order: G × C_out/G × n·HW.
      const at::Tensor grad_out = grad.narrow(0, b0, n)
                                      .view({n, out_channels, pixels})
                                      .permute({1, 0, 2})
                                      .reshape({groups, out_channels / groups, n * pixels});
      const at::Tensor grad_columns =
          at::bmm(weight_t, grad_out).view({s.channels * s.taps(), n * pixels});
      at::Tensor grad_input_n = grad_input.narrow(0, b0, n);
      Col2Im(grad_columns, offset_n, mask_n, s, grad_input_n);
      at::Tensor grad_offset_n = grad_offset.narrow(0, b0, n);
      at::Tensor grad_mask_n = NarrowOrUndefined(grad_mask, b0, n);
      OffsetMaskGrad(grad_columns, input_n, offset_n, mask_n, s, grad_offset_n, grad_mask_n);
      const at::Tensor columns = Im2Col(input_n, offset_n, mask_n, s);
      grad_weight.baddbmm_(grad_out, columns.view({groups, -1, n * pixels}).transpose(1, 2));
    }
    at::Tensor grad_bias = bias_grad ? grad.sum({0, 2, 3}) : at::Tensor();
    return {grad_input, grad_offset, grad_mask, grad_weight.view_as(weight_in), grad_bias};
  }
};

}  // namespace mrcnn::kernels
