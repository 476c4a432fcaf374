#pragma once
// Inference-time fast path for the model's convolutions on CPU.
//
// FastConv wraps a registered torch::nn::Conv2d and, optionally, the normalisation layer
// that follows it (its parameters, names and training behaviour are untouched). Forward
// computes relu?(norm(conv(x))).
// On CUDA, and on the CPU under autocast, with or without a gradient, a FrozenBatchNorm2d runs
// inside the convolution: conv(x, weight * scale) + shift, its scale and shift (C-sized) kept
// until a buffer changes, the product with the weight recomputed each call inside autograd
// (the weight keeps its gradient; parameters and checkpoint keys are unchanged). Under
// autocast nothing full-size is then float32 (the norm's float32 scale would promote every
// bf16/fp16 activation it multiplies), and the ReLU runs in place on the convolution's
// output. Equal to the modules up to float rounding.
// Otherwise the modules themselves run whenever a gradient may be needed, for any other
// dtype, at precision fp32 (CpuDenseMode::kFp32: torchvision's algorithm, so its numbers up
// to the CPU's own rounding), or when MRCNN_CPU_WINOGRAD=0; and the CPU inference fast path
// runs at precisions fp32-fast and bf16 (float32 or bf16 on CPU, no gradient recorded, see
// CpuInferenceFastPath):
//  - a FrozenBatchNorm2d is folded into the convolution's weight and bias (one pass over
//    the output instead of three);
//  - a 3×3 stride-1 convolution runs the Winograd kernel (kernels/ops.h WinogradConv3x3)
//    with F(6×6,3×3), F(4×4,3×3) or F(2×2,3×3) tiles chosen by the input's size
//    (fast_conv.cpp TileFor), with bias and ReLU fused; any other shape runs at::conv2d
//    with the folded weight and bias. Up to 5.1× fewer multiplications, but the large tiles'
//    transforms cost about one decimal digit (~1e-5 of a layer's output instead of ~3e-7),
//    which random-weight models amplify into box differences of 0.01-0.1 px
//    (bench/model/bench_fp32_fidelity.py); hence not at precision fp32.
// Under CpuDenseMode::kBf16 (reduced precision, issue 25) the same path runs every convolution
// in bfloat16 through oneDNN instead (AVX512_BF16/AMX dot products, twice the fp32 rate or
// more): the input is converted to bf16 if it is float32, the folded weight and bias are kept
// as a bf16 copy, and the output is bf16; small 3×3 maps run fp32-fast Winograd then.
// Folded and transformed filters are built by the first inference that needs them and
// kept until a source tensor changes (its storage or version counter). Results equal the
// modules' own up to float rounding (~1e-5 of the output's magnitude). A transformed filter
// is 1.8× (F(2×2)), 4× or 7.1× (F(6×6)) the weight's size: about 240 MB for
// ResNet-50-FPN's 3×3 layers at 480×640, plus ~95 MB of BN-folded backbone weights. Forward
// mutates these caches, so one model must not run inference on two threads at once (the
// server gives each worker its own model).
#include <ATen/core/Tensor.h>
#include <torch/nn/modules/conv.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace mrcnn::model {

struct ConvGeometry;
class NormLayer;
class FrozenBatchNorm2d;

class FastConv {
 public:
  FastConv() = default;
  // norm may be null (no normalisation) or any NormLayer; only FrozenBatchNorm2d is folded.
  explicit FastConv(torch::nn::Conv2d conv, std::shared_ptr<NormLayer> norm = nullptr);

  // relu?(norm(conv(x))).
  at::Tensor Forward(const at::Tensor& x, bool relu = false);
  // relu?(norm(conv(x)) + residual): a bottleneck's last convolution with its shortcut, an
  // FPN lateral with its top-down map. In bf16 mode oneDNN accumulates into residual's memory
  // when nothing else holds it (a temporary moved in), else into a copy of it.
  at::Tensor ForwardAdd(const at::Tensor& x, at::Tensor residual, bool relu = false);
  const torch::nn::Conv2d& conv() const { return conv_; }

 private:
  at::Tensor Modules(const at::Tensor& x, bool relu);
  bool Bf16For(const at::Tensor& x) const;  // this call runs oneDNN's bf16 convolution
  ConvGeometry Geometry() const;
  void EnsureBf16Weights();
  at::Tensor FrozenNormInside(const at::Tensor& x, bool relu);
  std::vector<at::Tensor> Sources() const;
  void Refresh();

  torch::nn::Conv2d conv_{nullptr};
  std::shared_ptr<NormLayer> norm_;
  FrozenBatchNorm2d* frozen_ = nullptr;  // norm_, when it is a FrozenBatchNorm2d
  bool fast_ok_ = false;                 // zero padding given as numbers, float32 weight
  bool winograd_ok_ = false;             // 3×3, stride 1, padding 1, no dilation or groups
  std::vector<std::pair<const void*, int64_t>> built_from_;  // storage and version of Sources()
  at::Tensor weight_, bias_;               // conv's own, or with the frozen norm folded in
  std::array<at::Tensor, 3> transformed_;  // Winograd filters by tile size: 2, 4, 6
  at::Tensor weight_bf16_, bias_bf16_;     // weight_ and bias_ as bf16 (CpuPrecisionScope)
  std::vector<std::pair<const void*, int64_t>> norm_built_from_;  // frozen_'s buffers
  at::Tensor norm_scale_, norm_shift_;                            // frozen_->ScaleShift()
};

// How the CPU inference fast path of this thread runs its dense layers (FastConv, the box
// head's fully connected layers, the mask predictor's deconvolution):
//  - kFp32: float32, the fast path off: the modules as torchvision runs them (precision
//    "fp32");
//  - kFp32Fast: float32 through the fast path (precision "fp32-fast": Winograd's ~1e-5
//    relative error per layer, frozen norms folded, RoIs on one canvas, ...);
//  - kBf16: bfloat16 dense layers; the rest (proposal and box decoding, NMS, ROIAlign, mask
//    pasting) stays float32 (precision "bf16").
enum class CpuDenseMode { kFp32, kFp32Fast, kBf16 };

// The mode of a resolved precision name (ResolvePrecision): "fp32-fast" and "bf16" name
// theirs; anything else (fp32, and CUDA's fp16) is kFp32.
CpuDenseMode CpuDenseModeOf(const std::string& precision);

// While alive, this thread's CPU inference fast path runs in `mode`. Scopes nest; the previous
// mode comes back on destruction; without one it is kFp32. Set by InferenceModel for its
// precision on CPU, and by the trainer's evaluation for TEST.PRECISION.
class CpuPrecisionScope {
 public:
  explicit CpuPrecisionScope(CpuDenseMode mode);
  ~CpuPrecisionScope();
  CpuPrecisionScope(const CpuPrecisionScope&) = delete;
  CpuPrecisionScope& operator=(const CpuPrecisionScope&) = delete;

 private:
  CpuDenseMode previous_;
};

// Whether a dense layer should run in bf16 on x: a kBf16 CpuPrecisionScope is alive on this thread,
// no gradient is recorded, x is a float32 or bf16 CPU tensor, CPU autocast is off and
// MRCNN_CPU_WINOGRAD is not 0 (the switch that turns the whole fast path off).
bool CpuBf16Path(const at::Tensor& x);

// bf16 copies of float32 tensors for the reduced-precision path, rebuilt when a source
// changes (its storage or version counter): evaluation during training sees fresh weights.
class Bf16Copies {
 public:
  const std::vector<at::Tensor>& Of(const std::vector<at::Tensor>& sources);

 private:
  std::vector<std::pair<const void*, int64_t>> built_from_;
  std::vector<at::Tensor> copies_;
};

// relu(conv1x1(x, weight) + bias) as bf16 mode runs it (oneDNN, bias and ReLU fused;
// onednn_fused_conv.h): x N×C×H×W and weight K×C×1×1 bf16 channels-last, bias K bf16. The
// door for the heads, which include no other backbone header (the mask predictor's
// deconvolution as 4K channels).
at::Tensor Bf16Conv1x1Relu(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

// Whether this CPU computes bf16 dot products natively (x86: AVX512_BF16 or AMX-BF16, by
// cpuinfo; arm64: the BF16 extension, by the kernel's HWCAP2): what precision "auto" means
// bf16 on.
bool CpuHasFastBf16();

// Whether this x86 CPU has AMX-BF16 tiles (cpuinfo): bf16 mode then runs every 3×3 layer in
// bf16, small maps too (fast_conv.cpp WinogradOverBf16).
bool CpuHasAmxBf16();

// Whether the CPU inference fast path (this file, MaskRcnnPredictor::LabelLogits, the stem
// max-pool, the RoI canvas) applies to x: this thread's mode is not kFp32, no gradient
// recorded, x a float32 N×C×H×W CPU tensor, CPU autocast off, and MRCNN_CPU_WINOGRAD not set
// to 0 (read once).
bool CpuInferenceFastPath(const at::Tensor& x);

}  // namespace mrcnn::model
