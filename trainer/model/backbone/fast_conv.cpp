#include "trainer/model/backbone/fast_conv.h"

#include <ATen/autocast_mode.h>
#include <ATen/cpu/Utils.h>
#include <c10/core/GradMode.h>
#include <torch/torch.h>

#include <cstdlib>
#include <cstring>

#if defined(__aarch64__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

#include "kernels/ops.h"
#include "trainer/model/backbone/onednn_fused_conv.h"
#include "trainer/model/parts.h"

namespace mrcnn::model {
namespace {

// Which Winograd tile a convolution over n images of h×w runs with. Fewer multiplications
// (F(6×6) 5.1×, F(4×4) 4×, F(2×2) 2.25× fewer than direct) only pay while the GEMMs have
// enough tiles to run at full speed and the tiles are not mostly padding; on the 2-core
// AVX2 VM (bench/kernels/bench_winograd.py, one thread) F(6×6) wins from about 128 tiles
// of 6×6 (the mask head's 100 RoIs of 14×14, P2, P3, layer1, layer2), F(2×2) below 32
// tiles of 4×4 (15×20 maps: layer4, P5), F(4×4) in between (layer3, P4).
int64_t TileFor(int64_t n, int64_t h, int64_t w) {
  auto tiles = [&](int64_t m) { return n * ((h + m - 1) / m) * ((w + m - 1) / m); };
  if (tiles(6) >= 128)
    return 6;
  if (tiles(4) >= 32)
    return 4;
  return 2;
}

bool CpuWinogradEnabled() {
  static const bool enabled = [] {
    const char* value = std::getenv("MRCNN_CPU_WINOGRAD");
    return value == nullptr || std::strcmp(value, "0") != 0;
  }();
  return enabled;
}

int64_t VersionOf(const at::Tensor& t) {
  // Inference tensors carry no version counter; they cannot change outside inference mode.
  return t.is_inference() ? 0 : static_cast<int64_t>(t._version());
}

// What a cache built from `sources` is keyed on: each tensor's storage and version counter,
// so a cache follows in-place updates (optimizer steps, checkpoints loaded with copy_).
std::vector<std::pair<const void*, int64_t>> SourceKey(const std::vector<at::Tensor>& sources) {
  std::vector<std::pair<const void*, int64_t>> key;
  key.reserve(sources.size());
  for (const at::Tensor& t : sources)
    key.emplace_back(t.data_ptr(), VersionOf(t));
  return key;
}

thread_local CpuDenseMode cpu_dense_mode = CpuDenseMode::kFp32;

// Whether cpuinfo reports the named x86 feature (never on arm64).
bool CpuReports(const char* name) {
#if defined(__aarch64__)
  (void)name;
  return false;
#else
  const auto capabilities = at::cpu::get_cpu_capabilities();
  const auto it = capabilities.find(name);
  return it != capabilities.end() && it->second.isBool() && it->second.toBool();
#endif
}

// Output positions (images × height × width) up to which a 3×3 layer runs Winograd in fp32
// rather than bf16 in bf16 mode (FastConv::Forward). With AMX tiles oneDNN's bf16 direct
// convolution beats fp32 Winograd at every size: on the 2-core AMX VM (issue 54) a 640×480
// request took 447 ms with none against 623 ms with the AVX512_BF16 threshold, whose layer2-4
// and P3-P5 then ran Winograd (backbone 166 against 260 ms, FPN 57 against 98, RPN 52
// against 89).
int64_t WinogradOverBf16() {
  static const int64_t positions = CpuHasAmxBf16() ? 0 : 100 * 136;
  return positions;
}

}  // namespace

CpuDenseMode CpuDenseModeOf(const std::string& precision) {
  if (precision == "bf16")
    return CpuDenseMode::kBf16;
  if (precision == "fp32-fast")
    return CpuDenseMode::kFp32Fast;
  return CpuDenseMode::kFp32;
}

CpuPrecisionScope::CpuPrecisionScope(CpuDenseMode mode) : previous_(cpu_dense_mode) {
  cpu_dense_mode = mode;
}
CpuPrecisionScope::~CpuPrecisionScope() {
  cpu_dense_mode = previous_;
}

bool CpuBf16Path(const at::Tensor& x) {
  return cpu_dense_mode == CpuDenseMode::kBf16 && CpuWinogradEnabled() &&
         !c10::GradMode::is_enabled() && x.is_cpu() &&
         (x.scalar_type() == at::kFloat || x.scalar_type() == at::kBFloat16) &&
         !at::autocast::is_autocast_enabled(at::kCPU);
}

const std::vector<at::Tensor>& Bf16Copies::Of(const std::vector<at::Tensor>& sources) {
  std::vector<std::pair<const void*, int64_t>> key = SourceKey(sources);
  if (key != built_from_) {
    copies_.clear();
    for (const at::Tensor& t : sources)
      copies_.push_back(t.to(at::kBFloat16));
    built_from_ = std::move(key);
  }
  return copies_;
}

bool CpuHasFastBf16() {
#if defined(__aarch64__)
  // ARMv8.6's BF16 dot products (BFDOT/BFMMLA; Graviton3 and later, Neoverse V1/V2), as the
  // kernel reports them: oneDNN's Arm backend uses them for bf16 convolutions and GEMMs.
  static const bool fast = (getauxval(AT_HWCAP2) & HWCAP2_BF16) != 0;
  return fast;
#else
  static const bool fast = CpuReports("avx512_bf16") || CpuReports("amx_bf16");
  return fast;
#endif
}

bool CpuHasAmxBf16() {
  static const bool amx = CpuReports("amx_bf16");
  return amx;
}

bool CpuInferenceFastPath(const at::Tensor& x) {
  return cpu_dense_mode != CpuDenseMode::kFp32 && CpuWinogradEnabled() &&
         !c10::GradMode::is_enabled() && x.is_cpu() && x.dim() == 4 &&
         x.scalar_type() == at::kFloat && !at::autocast::is_autocast_enabled(at::kCPU);
}

FastConv::FastConv(torch::nn::Conv2d conv, std::shared_ptr<NormLayer> norm)
    : conv_(std::move(conv)), norm_(std::move(norm)) {
  frozen_ = dynamic_cast<FrozenBatchNorm2d*>(norm_.get());
  const auto& o = conv_->options;
  const auto* padding = std::get_if<torch::ExpandingArray<2>>(&o.padding());
  fast_ok_ =
      padding != nullptr && std::holds_alternative<torch::enumtype::kZeros>(o.padding_mode());
  winograd_ok_ = fast_ok_ && (*o.kernel_size())[0] == 3 && (*o.kernel_size())[1] == 3 &&
                 (*o.stride())[0] == 1 && (*o.stride())[1] == 1 && (*o.dilation())[0] == 1 &&
                 (*o.dilation())[1] == 1 && o.groups() == 1 && (**padding)[0] == 1 &&
                 (**padding)[1] == 1;
}

at::Tensor FastConv::Modules(const at::Tensor& x, bool relu) {
  if (frozen_ != nullptr && fast_ok_ &&
      (x.is_cuda() || at::autocast::is_autocast_enabled(at::kCPU)))
    return FrozenNormInside(x, relu);
  at::Tensor y = conv_->forward(x);
  if (norm_)
    y = norm_->forward(y);
  return relu ? y.relu_() : y;
}

at::Tensor FastConv::FrozenNormInside(const at::Tensor& x, bool relu) {
  std::vector<std::pair<const void*, int64_t>> key = SourceKey(frozen_->Buffers());
  if (key != norm_built_from_) {
    std::tie(norm_scale_, norm_shift_) = frozen_->ScaleShift();
    norm_built_from_ = std::move(key);
  }
  // A weight-sized product each call, inside autograd: the weight keeps its gradient (the
  // chain rule through the scale), and the optimizer and checkpoints see the same parameter.
  const at::Tensor weight = conv_->weight * norm_scale_.reshape({-1, 1, 1, 1});
  const at::Tensor bias =
      conv_->bias.defined() ? conv_->bias * norm_scale_ + norm_shift_ : norm_shift_;
  const auto& o = conv_->options;
  const auto& padding = std::get<torch::ExpandingArray<2>>(o.padding());
  at::Tensor y = at::conv2d(x, weight, bias, *o.stride(), *padding, *o.dilation(), o.groups());
  return relu ? y.relu_() : y;
}

std::vector<at::Tensor> FastConv::Sources() const {
  std::vector<at::Tensor> sources{conv_->weight};
  if (conv_->bias.defined())
    sources.push_back(conv_->bias);
  if (frozen_ != nullptr)
    for (at::Tensor& buffer : frozen_->Buffers())
      sources.push_back(std::move(buffer));
  return sources;
}

void FastConv::Refresh() {
  std::vector<std::pair<const void*, int64_t>> key = SourceKey(Sources());
  if (key == built_from_)
    return;
  built_from_ = std::move(key);
  transformed_ = {};
  weight_bf16_ = bias_bf16_ = at::Tensor();
  weight_ = conv_->weight;
  bias_ = conv_->bias;
  if (frozen_ != nullptr) {
    // conv then x·scale + shift is one conv with weight·scale and bias·scale + shift.
    auto [scale, shift] = frozen_->ScaleShift();
    weight_ = conv_->weight * scale.reshape({-1, 1, 1, 1});
    bias_ = bias_.defined() ? bias_ * scale + shift : shift;
  }
}

at::Tensor Bf16Conv1x1Relu(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  return OneDnnConv(x, weight, bias, {{1, 1}, {0, 0}, {1, 1}, 1}, /*relu=*/true);
}

bool FastConv::Bf16For(const at::Tensor& x) const {
  return fast_ok_ && x.dim() == 4 && CpuBf16Path(x) &&
         !(winograd_ok_ && x.size(0) * x.size(2) * x.size(3) <= WinogradOverBf16());
}

ConvGeometry FastConv::Geometry() const {
  const auto& o = conv_->options;
  const auto& padding = std::get<torch::ExpandingArray<2>>(o.padding());
  auto vec = [](const auto& array) { return std::vector<int64_t>(array->begin(), array->end()); };
  return {vec(o.stride()), vec(padding), vec(o.dilation()), o.groups()};
}

void FastConv::EnsureBf16Weights() {
  if (!weight_bf16_.defined()) {
    weight_bf16_ = weight_.to(at::kBFloat16).contiguous(at::MemoryFormat::ChannelsLast);
    if (bias_.defined())
      bias_bf16_ = bias_.to(at::kBFloat16);
  }
}

at::Tensor FastConv::ForwardAdd(const at::Tensor& x, at::Tensor residual, bool relu) {
  const bool norm_after = norm_ != nullptr && frozen_ == nullptr;
  if (!norm_after && Bf16For(x) && residual.scalar_type() == at::kBFloat16 &&
      residual.is_contiguous(at::MemoryFormat::ChannelsLast)) {
    Refresh();
    EnsureBf16Weights();
    // Overwritten only when nothing else holds its memory (a temporary moved in).
    const bool owned = residual.use_count() == 1 && residual.storage().use_count() == 1;
    return OneDnnConvAccumulate(
        owned ? std::move(residual) : residual.clone(at::MemoryFormat::ChannelsLast),
        x.to(at::kBFloat16).contiguous(at::MemoryFormat::ChannelsLast), weight_bf16_, bias_bf16_,
        Geometry(), relu);
  }
  at::Tensor y = Forward(x).add_(residual);
  if (!relu)
    return y;
  if (y.scalar_type() == at::kBFloat16 && y.is_non_overlapping_and_dense() && !y.requires_grad()) {
    ReluBf16InPlace(y);
    return y;
  }
  return y.relu_();
}

at::Tensor FastConv::Forward(const at::Tensor& x, bool relu) {
  // In bf16 mode without AMX a small 3×3 map still runs fp32 Winograd (the input converted
  // back to float): F(6×6) or F(4×4) do 4-5× fewer multiplications, which beats oneDNN's
  // AVX512_BF16 direct convolution (2× the fp32 rate) while the GEMMs have enough tiles, up to
  // about 100×136 positions on the 2-core AVX512_BF16 VM (layer2-4 and P3-P5 at 800×1066; P2,
  // layer1 and the mask head's 100 RoIs of 14×14 run faster in bf16). AMX: see
  // WinogradOverBf16.
  const bool reduced = fast_ok_ && x.dim() == 4 && CpuBf16Path(x);
  const bool bf16 = Bf16For(x);
  if (reduced && !bf16 && x.scalar_type() == at::kBFloat16)
    // One pass to planar float32 for the fp32 Winograd below.
    return Forward(x.to(at::kFloat, false, false, at::MemoryFormat::Contiguous), relu);
  if (!bf16 && (!fast_ok_ || conv_->weight.scalar_type() != at::kFloat || !CpuInferenceFastPath(x)))
    return Modules(x, relu);
  Refresh();
  // A norm that cannot be folded (GroupNorm) runs after the convolution, the ReLU after it.
  const bool norm_after = norm_ != nullptr && frozen_ == nullptr;
  const bool conv_relu = relu && !norm_after;
  at::Tensor y;
  if (bf16) {
    // Channels-last end to end: oneDNN's bf16 kernels work in NHWC blocks, so a planar input
    // or weight would be reordered on every call (about 20 % of a 3×3 layer's time).
    EnsureBf16Weights();
    const at::Tensor input = x.to(at::kBFloat16).contiguous(at::MemoryFormat::ChannelsLast);
    y = OneDnnConv(input, weight_bf16_, bias_bf16_, Geometry(), conv_relu);
  } else if (winograd_ok_) {
    const int64_t tile = TileFor(x.size(0), x.size(2), x.size(3));
    at::Tensor& transformed = transformed_[tile / 2 - 1];
    if (!transformed.defined())
      transformed = kernels::WinogradConv3x3Weight(weight_, tile);
    std::optional<at::Tensor> bias;
    if (bias_.defined())
      bias = bias_;
    y = kernels::WinogradConv3x3(x, transformed, bias, conv_relu, tile);
  } else {
    const auto& o = conv_->options;
    const auto& padding = std::get<torch::ExpandingArray<2>>(o.padding());
    y = at::conv2d(x, weight_, bias_, *o.stride(), *padding, *o.dilation(), o.groups());
    if (conv_relu)
      y.relu_();
  }
  if (norm_after) {
    if (bf16)
      y = y.to(at::kFloat);  // the norm's parameters are float32
    y = norm_->forward(y);
    if (relu)
      y.relu_();
  }
  return y;
}

}  // namespace mrcnn::model
