#pragma once
// Inference-time fast path for 3×3 stride-1 convolutions on CPU.
//
// FastConv3x3 wraps a registered torch::nn::Conv2d (its parameters, names and training
// behaviour are untouched). Forward runs the module's own convolution whenever a gradient
// may be needed, on CUDA, under autocast, for any other dtype, or when MRCNN_CPU_WINOGRAD=0;
// otherwise, for float32 on CPU with no gradient recorded, it runs the Winograd kernel
// (kernels/ops.h WinogradConv3x3) with F(6×6,3×3), F(4×4,3×3) or F(2×2,3×3) tiles chosen by
// the input's size (fast_conv.cpp TileFor), the filter transformed once per tile size and
// kept until the weight changes (its version counter or storage). Results equal the
// direct convolution up to float rounding (~1e-5 of the output's magnitude). A transformed
// filter is 1.8× (F(2×2)), 4× or 7.1× (F(6×6)) the weight's size (about 200 MB for
// ResNet-50-FPN's 3×3 layers at 480×640) and is built by the first inference that needs
// it; Forward mutates that cache, so one model must not run inference on two threads at
// once (the server gives each worker its own model).
#include <ATen/core/Tensor.h>
#include <torch/nn/modules/conv.h>

#include <cstdint>

namespace mrcnn::model {

class FastConv3x3 {
 public:
  FastConv3x3() = default;
  explicit FastConv3x3(torch::nn::Conv2d conv);

  // conv(x), followed by ReLU when relu is true (fused into the fast path).
  at::Tensor Forward(const at::Tensor& x, bool relu = false);
  const torch::nn::Conv2d& conv() const { return conv_; }

 private:
  bool Eligible(const at::Tensor& x) const;

  torch::nn::Conv2d conv_{nullptr};
  bool shape_ok_ = false;
  at::Tensor transformed_[3];  // by tile size: 2, 4, 6
  const void* transformed_from_ = nullptr;
  int64_t transformed_version_ = -1;
};

// Whether the CPU inference fast path (this file, MaskRcnnPredictor::LabelLogits, the stem
// max-pool) applies to x: no gradient recorded, x a float32 N×C×H×W CPU tensor, CPU autocast
// off, and MRCNN_CPU_WINOGRAD not set to 0 (read once).
bool CpuInferenceFastPath(const at::Tensor& x);

}  // namespace mrcnn::model
