#pragma once
// oneDNN convolutions with their epilogue fused, for the CPU inference fast path in bf16
// (fast_conv.h): PyTorch's mkldnn::_convolution_pointwise ops, the ones Inductor's CPU backend
// emits, called through the dispatcher (they are registered by libtorch_cpu, not in ATen's
// headers). A separate ReLU or residual add over a bf16 map costs a full pass at about half
// the memory speed (bf16 is widened to float and back): on the 2-core AMX VM the backbone's
// 61 ReLUs and 20 adds took 130 ms of a 450 ms request (issue 54).
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace mrcnn::model {

struct ConvGeometry {
  std::vector<int64_t> stride, padding, dilation;
  int64_t groups = 1;
};

// Whether the fused ops are in use: registered in this libtorch (built with oneDNN) and none
// has failed yet. A fused call that throws (a oneDNN build whose backend lacks the post-op,
// e.g. an arm64 one) turns them off for the process; that call and all later ones run unfused.
bool OneDnnFusedConvAvailable();

// Turns the fused ops off for the rest of the process, as a failed call does (for tests of
// the unfused fallback).
void DisableOneDnnFusedConv();

// relu?(conv(x, weight, bias)) in one oneDNN primitive where available (else at::conv2d and
// ReluBf16InPlace); x, weight (and the result) bf16 channels-last.
at::Tensor OneDnnConv(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                      const ConvGeometry& geometry, bool relu);

// accumulator += conv(x, weight, bias) in place (oneDNN's sum post-op: one rounding to bf16
// instead of two; unfused where unavailable), then ReLU in place when asked; returns
// accumulator. accumulator must be a bf16 channels-last tensor of the output's shape that the
// caller owns (it is overwritten).
at::Tensor OneDnnConvAccumulate(at::Tensor accumulator, const at::Tensor& x,
                                const at::Tensor& weight, const at::Tensor& bias,
                                const ConvGeometry& geometry, bool relu);

// max(t, 0) in place on a dense bf16 CPU tensor, on its bit patterns (a sign-bit test per
// 16-bit lane, which compilers vectorise): NaN stays NaN, -0 becomes +0.
void ReluBf16InPlace(at::Tensor& t);

}  // namespace mrcnn::model
