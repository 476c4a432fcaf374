// Built-in parts: ResNet-18/50/101 bodies, FPN with LastLevelMaxPool, the standard RPN
// head, the two-MLP box head, the four-conv mask head, and the predictors. Layer names,
// defaults and initialisation follow torchvision 0.26.
#include "trainer/model/parts.h"

#include <torch/torch.h>

#include <cmath>
#include <limits>

#include "trainer/model/backbone/fast_conv.h"
#include "trainer/model/registry.h"

namespace mrcnn::model {
namespace nn = torch::nn;

FrozenBatchNorm2d::FrozenBatchNorm2d(int64_t channels, double eps) : eps_(eps) {
  weight_ = register_buffer("weight", torch::ones({channels}));
  bias_ = register_buffer("bias", torch::zeros({channels}));
  running_mean_ = register_buffer("running_mean", torch::zeros({channels}));
  running_var_ = register_buffer("running_var", torch::ones({channels}));
}

std::pair<at::Tensor, at::Tensor> FrozenBatchNorm2d::ScaleShift() const {
  // Same operation order as torchvision.ops.FrozenBatchNorm2d.
  at::Tensor scale = weight_ * (running_var_ + eps_).rsqrt();
  at::Tensor shift = bias_ - running_mean_ * scale;
  return {scale, shift};
}

at::Tensor FrozenBatchNorm2d::forward(const at::Tensor& x) {
  auto [scale, shift] = ScaleShift();
  // In place on the fresh product: the same two operations in the same order (bit-equal
  // to x * scale + shift) with one full-size temporary fewer per layer.
  return (x * scale.reshape({1, -1, 1, 1})).add_(shift.reshape({1, -1, 1, 1}));
}

GroupNorm2d::GroupNorm2d(int64_t channels, int64_t groups) : groups_(groups) {
  weight_ = register_parameter("weight", torch::ones({channels}));
  bias_ = register_parameter("bias", torch::zeros({channels}));
}

at::Tensor GroupNorm2d::forward(const at::Tensor& x) {
  return at::group_norm(x, groups_, weight_, bias_, 1e-5);
}

namespace {

std::shared_ptr<NormLayer> MakeNorm(const ModelConfig& config, int64_t channels) {
  if (config.norm == "GN")
    return std::make_shared<GroupNorm2d>(channels, 32);
  return std::make_shared<FrozenBatchNorm2d>(channels, config.frozen_bn_eps);
}

nn::Conv2d Conv(int64_t in, int64_t out, int64_t k, int64_t stride, int64_t padding, bool bias) {
  nn::Conv2d conv(nn::Conv2dOptions(in, out, k).stride(stride).padding(padding).bias(bias));
  return conv;
}

void KaimingNormalFanOut(const nn::Conv2d& conv) {
  nn::init::kaiming_normal_(conv->weight, 0.0, torch::kFanOut, torch::kReLU);
  if (conv->bias.defined())
    nn::init::zeros_(conv->bias);
}

// max_pool2d(x, 3, 2, 1). ATen's CPU kernel also computes the argmax of every window and
// takes ~40 ms for the stem of a 480×640 image on one core; for inference the same maxima
// come from two strided passes (rows, then columns) over a -inf padded copy in ~1/4 of the
// time. Max is exact and both propagate NaN, so the results are identical.
at::Tensor MaxPool3x3Stride2(const at::Tensor& x) {
  if (!CpuInferenceFastPath(x) && !CpuBf16Path(x))
    return torch::max_pool2d(x, 3, 2, 1);
  const int64_t h = x.size(2), w = x.size(3);
  const int64_t out_h = (h - 1) / 2 + 1, out_w = (w - 1) / 2 + 1;
  const at::Tensor padded =
      at::constant_pad_nd(x, {1, 1, 1, 1}, -std::numeric_limits<double>::infinity());
  auto cols = [&](int64_t first) { return padded.slice(3, first, first + 2 * out_w - 1, 2); };
  const at::Tensor across = at::maximum(at::maximum(cols(0), cols(1)), cols(2));
  auto rows = [&](int64_t first) { return across.slice(2, first, first + 2 * out_h - 1, 2); };
  return at::maximum(at::maximum(rows(0), rows(1)), rows(2));
}

// ResNet residual block. Bottleneck (expansion 4) puts the stride on the 3x3 conv
// (torchvision's "ResNet v1.5"); the basic block (expansion 1) is used by ResNet-18.
class ResidualBlock : public nn::Module {
 public:
  ResidualBlock(const ModelConfig& config, bool bottleneck, int64_t in, int64_t width,
                int64_t stride)
      : bottleneck_(bottleneck) {
    const int64_t out = bottleneck ? width * 4 : width;
    if (bottleneck) {
      conv1_ = register_module("conv1", Conv(in, width, 1, 1, 0, false));
      bn1_ = register_module("bn1", MakeNorm(config, width));
      conv2_ = register_module("conv2", Conv(width, width, 3, stride, 1, false));
      bn2_ = register_module("bn2", MakeNorm(config, width));
      conv3_ = register_module("conv3", Conv(width, out, 1, 1, 0, false));
      bn3_ = register_module("bn3", MakeNorm(config, out));
    } else {
      conv1_ = register_module("conv1", Conv(in, width, 3, stride, 1, false));
      bn1_ = register_module("bn1", MakeNorm(config, width));
      conv2_ = register_module("conv2", Conv(width, width, 3, 1, 1, false));
      bn2_ = register_module("bn2", MakeNorm(config, width));
    }
    if (stride != 1 || in != out) {
      downsample_ = register_module("downsample", nn::ModuleList());
      down_conv_ = Conv(in, out, 1, stride, 0, false);
      down_norm_ = MakeNorm(config, out);
      downsample_->push_back(down_conv_);
      downsample_->push_back(down_norm_);
      down_fast_ = FastConv(down_conv_, down_norm_);
    }
    conv1_fast_ = FastConv(conv1_, bn1_);
    conv2_fast_ = FastConv(conv2_, bn2_);
    if (bottleneck)
      conv3_fast_ = FastConv(conv3_, bn3_);
    for (auto* conv : {&conv1_, &conv2_, &conv3_, &down_conv_}) {
      if (!conv->is_empty())
        KaimingNormalFanOut(*conv);
    }
  }

  at::Tensor Forward(const at::Tensor& x) {
    // ReLU and the residual add run in place on fresh temporaries, as torchvision's
    // Bottleneck does (inplace=True): none of them is saved for backward, and every
    // avoided allocation is a full activation map.
    at::Tensor out = conv1_fast_.Forward(x, /*relu=*/true);
    if (bottleneck_) {
      out = conv2_fast_.Forward(out, /*relu=*/true);
      out = conv3_fast_.Forward(out);
    } else {
      out = conv2_fast_.Forward(out);
    }
    at::Tensor identity = downsample_.is_empty() ? x : down_fast_.Forward(x);
    return out.add_(identity).relu_();
  }

 private:
  bool bottleneck_;
  nn::Conv2d conv1_{nullptr}, conv2_{nullptr}, conv3_{nullptr}, down_conv_{nullptr};
  FastConv conv1_fast_, conv2_fast_, conv3_fast_, down_fast_;  // each with its norm
  std::shared_ptr<NormLayer> bn1_, bn2_, bn3_, down_norm_;
  nn::ModuleList downsample_{nullptr};
};

class ResNetBody : public BackboneBody {
 public:
  ResNetBody(const ModelConfig& config, bool bottleneck, std::vector<int64_t> blocks) {
    conv1_ = register_module("conv1", Conv(3, 64, 7, 2, 3, false));
    KaimingNormalFanOut(conv1_);
    bn1_ = register_module("bn1", MakeNorm(config, 64));
    conv1_fast_ = FastConv(conv1_, bn1_);
    int64_t in = 64;
    for (size_t stage = 0; stage < 4; ++stage) {
      const int64_t width = 64LL << stage;
      auto layer = register_module("layer" + std::to_string(stage + 1), nn::ModuleList());
      std::vector<std::shared_ptr<ResidualBlock>> stage_blocks;
      for (int64_t b = 0; b < blocks[stage]; ++b) {
        auto block = std::make_shared<ResidualBlock>(config, bottleneck, in, width,
                                                     (b == 0 && stage > 0) ? 2 : 1);
        layer->push_back(block);
        stage_blocks.push_back(block);
        in = bottleneck ? width * 4 : width;
      }
      out_channels_.push_back(in);
      stages_.push_back(std::move(stage_blocks));
    }
  }

  std::vector<at::Tensor> Forward(const at::Tensor& images) override {
    at::Tensor x = conv1_fast_.Forward(images, /*relu=*/true);
    x = MaxPool3x3Stride2(x);
    std::vector<at::Tensor> outs;
    for (auto& stage : stages_) {
      for (auto& block : stage)
        x = block->Forward(x);
      outs.push_back(x);
    }
    return outs;
  }
  std::vector<int64_t> OutChannels() const override { return out_channels_; }

 private:
  nn::Conv2d conv1_{nullptr};
  std::shared_ptr<NormLayer> bn1_;
  FastConv conv1_fast_;
  std::vector<std::vector<std::shared_ptr<ResidualBlock>>> stages_;
  std::vector<int64_t> out_channels_;
};

std::vector<int64_t> ResNetChannels(const std::string& name) {
  if (name == "resnet18")
    return {64, 128, 256, 512};
  return {256, 512, 1024, 2048};
}

// FPN (torchvision FeaturePyramidNetwork + LastLevelMaxPool): lateral 1x1 convs
// (inner_blocks), nearest top-down upsampling to the lateral's size, 3x3 output convs
// (layer_blocks), and P6 = max_pool(P5, kernel 1, stride 2).
class Fpn : public Neck {
 public:
  Fpn(const std::vector<int64_t>& in_channels, int64_t out_channels) : out_channels_(out_channels) {
    inner_blocks_ = register_module("inner_blocks", nn::ModuleList());
    layer_blocks_ = register_module("layer_blocks", nn::ModuleList());
    for (int64_t in : in_channels) {
      auto inner = Conv(in, out_channels, 1, 1, 0, true);
      auto layer = Conv(out_channels, out_channels, 3, 1, 1, true);
      for (auto* conv : {&inner, &layer}) {
        nn::init::kaiming_uniform_((*conv)->weight, 1.0);
        nn::init::zeros_((*conv)->bias);
      }
      inner_blocks_->push_back(nn::Sequential(inner));
      layer_blocks_->push_back(nn::Sequential(layer));
      inner_.push_back(FastConv(inner));
      layer_.push_back(FastConv(layer));
    }
  }

  std::vector<at::Tensor> Forward(const std::vector<at::Tensor>& x) override {
    const size_t n = x.size();
    TORCH_CHECK(n == inner_.size(), "FPN expects ", inner_.size(), " inputs, got ", n);
    std::vector<at::Tensor> results(n);
    at::Tensor last_inner = inner_[n - 1].Forward(x[n - 1]);
    results[n - 1] = layer_[n - 1].Forward(last_inner);
    for (size_t i = n - 1; i-- > 0;) {
      at::Tensor lateral = inner_[i].Forward(x[i]);
      at::Tensor top_down = at::upsample_nearest2d(last_inner, {lateral.size(-2), lateral.size(-1)},
                                                   std::nullopt, std::nullopt);
      last_inner = lateral.add_(top_down);  // lateral is a fresh temporary
      results[i] = layer_[i].Forward(last_inner);
    }
    results.push_back(torch::max_pool2d(results.back(), 1, 2, 0));
    return results;
  }
  int64_t OutChannels() const override { return out_channels_; }
  int64_t NumRpnOnlyLevels() const override { return 1; }

 private:
  int64_t out_channels_;
  nn::ModuleList inner_blocks_{nullptr}, layer_blocks_{nullptr};
  std::vector<FastConv> inner_, layer_;
};

// torchvision RPNHead with one conv layer: 3x3 conv + ReLU shared over levels, then
// 1x1 objectness (A) and 1x1 box deltas (4A).
class StandardRpnHead : public RpnHead {
 public:
  StandardRpnHead(int64_t channels, int64_t num_anchors) {
    conv_ = Conv(channels, channels, 3, 1, 1, true);
    // Nested for the key rpn.head.conv.0.0.weight; nn::Sequential(nn::Sequential(...)) would
    // copy the holder instead of nesting it, and a Sequential cannot hold a Sequential.
    nn::ModuleList conv_block;
    conv_block->push_back(nn::Sequential(conv_, nn::ReLU()));
    register_module("conv", conv_block);
    cls_logits_ = register_module("cls_logits", Conv(channels, num_anchors, 1, 1, 0, true));
    bbox_pred_ = register_module("bbox_pred", Conv(channels, num_anchors * 4, 1, 1, 0, true));
    for (auto* conv : {&conv_, &cls_logits_, &bbox_pred_}) {
      nn::init::normal_((*conv)->weight, 0.0, 0.01);
      nn::init::zeros_((*conv)->bias);
    }
    conv_fast_ = FastConv(conv_);
    cls_logits_fast_ = FastConv(cls_logits_);
    bbox_pred_fast_ = FastConv(bbox_pred_);
  }
  // Under a CpuBf16Scope the logits and deltas come out bf16; Rpn decodes them as float32.
  std::pair<std::vector<at::Tensor>, std::vector<at::Tensor>> Forward(
      const std::vector<at::Tensor>& features) override {
    std::vector<at::Tensor> logits, deltas;
    for (const auto& f : features) {
      at::Tensor t = conv_fast_.Forward(f, /*relu=*/true);
      logits.push_back(cls_logits_fast_.Forward(t));
      deltas.push_back(bbox_pred_fast_.Forward(t));
    }
    return {logits, deltas};
  }

 private:
  nn::Conv2d conv_{nullptr}, cls_logits_{nullptr}, bbox_pred_{nullptr};
  FastConv conv_fast_, cls_logits_fast_, bbox_pred_fast_;
};

// torchvision TwoMLPHead: flatten, fc6 + ReLU, fc7 + ReLU.
class TwoMlpHead : public BoxHead {
 public:
  TwoMlpHead(int64_t in_features, int64_t representation) : representation_(representation) {
    fc6_ = register_module("fc6", nn::Linear(in_features, representation));
    fc7_ = register_module("fc7", nn::Linear(representation, representation));
  }
  // Under a CpuBf16Scope fc6 and fc7 run in bf16 (fc6 alone is 12.8 GMAC for 1000 RoIs of
  // ResNet-50-FPN); the result is float32 again for the predictor.
  at::Tensor Forward(const at::Tensor& pooled) override {
    at::Tensor x = pooled.flatten(1);
    if (!CpuBf16Path(x))
      return fc7_->forward(fc6_->forward(x).relu_()).relu_();
    const std::vector<at::Tensor>& w =
        bf16_.Of({fc6_->weight, fc6_->bias, fc7_->weight, fc7_->bias});
    at::Tensor h = at::linear(x.to(at::kBFloat16), w[0], w[1]).relu_();
    return at::linear(h, w[2], w[3]).relu_().to(at::kFloat);
  }
  int64_t RepresentationSize() const override { return representation_; }

 private:
  int64_t representation_;
  nn::Linear fc6_{nullptr}, fc7_{nullptr};
  Bf16Copies bf16_;
};

// torchvision MaskRCNNHeads: four 3x3 conv + ReLU layers, children named 0..3.
class FourConvMaskHead : public MaskHead {
 public:
  FourConvMaskHead(int64_t in_channels, int64_t dim) : dim_(dim) {
    int64_t in = in_channels;
    for (int i = 0; i < 4; ++i) {
      auto conv = Conv(in, dim, 3, 1, 1, true);
      KaimingNormalFanOut(conv);
      register_module(std::to_string(i), nn::Sequential(conv, nn::ReLU()));
      convs_.push_back(FastConv(conv));
      in = dim;
    }
  }
  at::Tensor Forward(const at::Tensor& pooled) override {
    at::Tensor x = pooled;
    for (auto& conv : convs_)
      x = conv.Forward(x, /*relu=*/true);
    return x;
  }
  int64_t OutChannels() const override { return dim_; }

 private:
  int64_t dim_;
  std::vector<FastConv> convs_;
};

int64_t AnchorsPerLocation(const ModelConfig& config) {
  return static_cast<int64_t>(config.anchor_sizes.front().size() *
                              config.anchor_aspect_ratios.front().size());
}

}  // namespace

FastRcnnPredictor::FastRcnnPredictor(int64_t in_features, int64_t num_classes_with_background) {
  cls_score_ = register_module("cls_score", nn::Linear(in_features, num_classes_with_background));
  bbox_pred_ =
      register_module("bbox_pred", nn::Linear(in_features, num_classes_with_background * 4));
}

std::pair<at::Tensor, at::Tensor> FastRcnnPredictor::Forward(const at::Tensor& x) {
  at::Tensor flat = x.flatten(1);
  return {cls_score_->forward(flat), bbox_pred_->forward(flat)};
}

MaskRcnnPredictor::MaskRcnnPredictor(int64_t in_channels, int64_t dim_reduced,
                                     int64_t num_classes_with_background) {
  conv5_mask_ = register_module(
      "conv5_mask",
      nn::ConvTranspose2d(nn::ConvTranspose2dOptions(in_channels, dim_reduced, 2).stride(2)));
  mask_fcn_logits_ = register_module("mask_fcn_logits",
                                     Conv(dim_reduced, num_classes_with_background, 1, 1, 0, true));
  nn::init::kaiming_normal_(conv5_mask_->weight, 0.0, torch::kFanOut, torch::kReLU);
  nn::init::zeros_(conv5_mask_->bias);
  KaimingNormalFanOut(mask_fcn_logits_);
}

at::Tensor MaskRcnnPredictor::Forward(const at::Tensor& x) {
  return mask_fcn_logits_->forward(conv5_mask_->forward(x).relu_());
}

at::Tensor MaskRcnnPredictor::LabelLogits(const at::Tensor& x, const at::Tensor& labels) {
  const bool bf16 = CpuBf16Path(x);
  if (bf16 && x.scalar_type() != at::kBFloat16)
    return LabelLogits(x.to(at::kBFloat16), labels);
  const std::vector<at::Tensor> params =
      bf16 ? bf16_.Of({conv5_mask_->weight, conv5_mask_->bias, mask_fcn_logits_->weight,
                       mask_fcn_logits_->bias})
           : std::vector<at::Tensor>{conv5_mask_->weight, conv5_mask_->bias,
                                     mask_fcn_logits_->weight, mask_fcn_logits_->bias};
  const at::Tensor& deconv_w = params[0];  // C×K×2×2
  if (!bf16 && (!CpuInferenceFastPath(x) || deconv_w.scalar_type() != at::kFloat)) {
    at::Tensor idx = torch::arange(x.size(0), labels.options());
    return Forward(x).index({idx, labels});
  }
  const int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
  const int64_t k = deconv_w.size(1);
  // Deconvolution with kernel 2 and stride 2 has no overlap: output pixel (2i+a, 2j+b)
  // of channel k is Σ_c w[c,k,a,b]·x[c,i,j]. Rows (k, a, b) of one GEMM give, per RoI,
  // a K × (2·2·H·W) matrix: ReLU(deconv) in (a, b, i, j) order, ready for the 1×1 logits.
  // bmm with the weight broadcast writes (k, a, b) × (i, j) per RoI in place; matmul
  // would fold the RoIs into one GEMM and transpose its result with an extra copy.
  const at::Tensor weight = deconv_w.permute({1, 2, 3, 0}).reshape({4 * k, c});
  at::Tensor z = at::bmm(weight.unsqueeze(0).expand({n, 4 * k, c}), x.reshape({n, c, h * w}))
                     .view({n, k, 4 * h * w});
  z.add_(params[1].view({1, k, 1})).relu_();
  const at::Tensor logit_w = params[2].flatten(1).index_select(0, labels);
  const at::Tensor logit_b = params[3].index_select(0, labels);
  at::Tensor out = at::baddbmm(logit_b.view({n, 1, 1}), logit_w.unsqueeze(1), z);
  // (a, b, i, j) -> (i, a, j, b): the 2H×2W map.
  return out.view({n, 2, 2, h, w}).permute({0, 3, 1, 4, 2}).reshape({n, 2 * h, 2 * w});
}

void FreezeBackboneLayers(BackboneBody& body, int trainable_layers) {
  static const char* kOrder[] = {"layer4", "layer3", "layer2", "layer1", "conv1"};
  std::vector<std::string> train;
  for (int i = 0; i < trainable_layers && i < 5; ++i)
    train.emplace_back(kOrder[i]);
  if (trainable_layers == 5)
    train.emplace_back("bn1");
  for (auto& item : body.named_parameters(true)) {
    bool trainable = false;
    for (const auto& prefix : train)
      trainable |= item.key().rfind(prefix, 0) == 0;
    if (!trainable)
      item.value().set_requires_grad(false);
  }
}

Registry<BackboneBody>& BackboneRegistry() {
  static Registry<BackboneBody> registry("backbone", "MODEL.BACKBONE.NAME");
  static bool populated = [] {
    registry.Add("resnet18", [](const ModelConfig& c) {
      return std::make_shared<ResNetBody>(c, false, std::vector<int64_t>{2, 2, 2, 2});
    });
    registry.Add("resnet50", [](const ModelConfig& c) {
      return std::make_shared<ResNetBody>(c, true, std::vector<int64_t>{3, 4, 6, 3});
    });
    registry.Add("resnet101", [](const ModelConfig& c) {
      return std::make_shared<ResNetBody>(c, true, std::vector<int64_t>{3, 4, 23, 3});
    });
    return true;
  }();
  (void)populated;
  return registry;
}

Registry<Neck>& NeckRegistry() {
  static Registry<Neck> registry("neck", "MODEL.NECK.NAME");
  static bool populated = [] {
    registry.Add("fpn", [](const ModelConfig& c) {
      return std::make_shared<Fpn>(ResNetChannels(c.backbone), c.fpn_out_channels);
    });
    return true;
  }();
  (void)populated;
  return registry;
}

Registry<RpnHead>& RpnHeadRegistry() {
  static Registry<RpnHead> registry("RPN head", "MODEL.RPN.HEAD_NAME");
  static bool populated = [] {
    registry.Add("standard", [](const ModelConfig& c) {
      return std::make_shared<StandardRpnHead>(c.fpn_out_channels, AnchorsPerLocation(c));
    });
    return true;
  }();
  (void)populated;
  return registry;
}

Registry<BoxHead>& BoxHeadRegistry() {
  static Registry<BoxHead> registry("box head", "MODEL.ROI_BOX_HEAD.NAME");
  static bool populated = [] {
    registry.Add("two_mlp", [](const ModelConfig& c) {
      const int64_t r = c.box_pooler_resolution;
      return std::make_shared<TwoMlpHead>(c.fpn_out_channels * r * r, c.box_fc_dim);
    });
    return true;
  }();
  (void)populated;
  return registry;
}

Registry<MaskHead>& MaskHeadRegistry() {
  static Registry<MaskHead> registry("mask head", "MODEL.ROI_MASK_HEAD.NAME");
  static bool populated = [] {
    registry.Add("four_conv", [](const ModelConfig& c) {
      return std::make_shared<FourConvMaskHead>(c.fpn_out_channels, c.mask_conv_dim);
    });
    return true;
  }();
  (void)populated;
  return registry;
}

}  // namespace mrcnn::model
