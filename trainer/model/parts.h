#pragma once
// The interchangeable parts of Mask R-CNN (see registry.h) and the built-in ones.
// Module and parameter names reproduce torchvision's, so state_dict keys are identical
// (backbone.body.layer1.0.conv1.weight, rpn.head.conv.0.0.weight, ...).
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "trainer/model/backbone/fast_conv.h"
#include "trainer/model/config.h"

namespace mrcnn::model {

// Feature extractor: image batch -> feature maps, finest first (C2..C5 for ResNets).
class BackboneBody : public torch::nn::Module {
 public:
  virtual std::vector<at::Tensor> Forward(const at::Tensor& images) = 0;
  virtual std::vector<int64_t> OutChannels() const = 0;
};

// Multi-scale neck: backbone maps -> pyramid levels, finest first. The last NumPoolOnly()
// levels are extra levels used by the RPN only (FPN's P6), not by the ROI poolers.
class Neck : public torch::nn::Module {
 public:
  virtual std::vector<at::Tensor> Forward(const std::vector<at::Tensor>& inputs) = 0;
  virtual int64_t OutChannels() const = 0;
  virtual int64_t NumRpnOnlyLevels() const = 0;
};

// Per-level objectness logits (N x A x H x W) and box deltas (N x 4A x H x W).
class RpnHead : public torch::nn::Module {
 public:
  virtual std::pair<std::vector<at::Tensor>, std::vector<at::Tensor>> Forward(
      const std::vector<at::Tensor>& features) = 0;
};

// Pooled ROI features (K x C x R x R) -> K x RepresentationSize().
class BoxHead : public torch::nn::Module {
 public:
  virtual at::Tensor Forward(const at::Tensor& pooled) = 0;
  virtual int64_t RepresentationSize() const = 0;
};

// Pooled ROI features (K x C x R x R) -> K x OutChannels() x R x R.
class MaskHead : public torch::nn::Module {
 public:
  virtual at::Tensor Forward(const at::Tensor& pooled) = 0;
  virtual int64_t OutChannels() const = 0;
};

// Pooled ROI features (K x C x R x R) -> K x NUM_KEYPOINTS x S x S heatmap logits. Predictor():
// the module holding the heatmap predictor's parameters, which the ROI heads register beside
// the head (roi_heads.keypoint_predictor, torchvision's layout).
class KeypointHead : public torch::nn::Module {
 public:
  virtual at::Tensor Forward(const at::Tensor& pooled) = 0;
  virtual std::shared_ptr<torch::nn::Module> Predictor() const = 0;
};

// C4's res5 head (Detectron2's Res5ROIHeads): ResNet's res5 stage (MODEL.RESNETS, children
// layer4.0..2) over the pooled res4 features, shared by the box predictor (the map averaged:
// K x C) and the mask predictor (the map itself, through MaskHeadOnRes5).
class Res5Head : public BoxHead {
 public:
  explicit Res5Head(const ModelConfig& config);
  at::Tensor Forward(const at::Tensor& pooled) override;
  // K x C x R/2 x R/2 for K x C_res4 x R x R pooled features.
  at::Tensor Trunk(const at::Tensor& pooled);
  int64_t RepresentationSize() const override { return channels_; }

 private:
  int64_t channels_;
  std::function<at::Tensor(const at::Tensor&)> trunk_;
};

// A mask head that is `res5`'s trunk (not registered again: its parameters stay the box
// head's), as Res5ROIHeads feeds its mask predictor.
std::shared_ptr<MaskHead> MaskHeadOnRes5(std::shared_ptr<Res5Head> res5);

// Normalisation used inside the backbone. FrozenBatchNorm2d keeps torchvision's buffers
// (weight, bias, running_mean, running_var) and computes x * scale + shift exactly as
// torchvision does; GroupNorm2d has trainable weight/bias (32 groups).
class NormLayer : public torch::nn::Module {
 public:
  virtual at::Tensor forward(const at::Tensor& x) = 0;
};

class FrozenBatchNorm2d : public NormLayer {
 public:
  FrozenBatchNorm2d(int64_t channels, double eps);
  at::Tensor forward(const at::Tensor& x) override;
  // forward(x) is x * scale + shift with these per-channel (C) tensors.
  std::pair<at::Tensor, at::Tensor> ScaleShift() const;
  // The buffers scale and shift are computed from.
  std::vector<at::Tensor> Buffers() const { return {weight_, bias_, running_mean_, running_var_}; }

 private:
  double eps_;
  at::Tensor weight_, bias_, running_mean_, running_var_;
};

class GroupNorm2d : public NormLayer {
 public:
  GroupNorm2d(int64_t channels, int64_t groups);
  at::Tensor forward(const at::Tensor& x) override;

 private:
  int64_t groups_;
  at::Tensor weight_, bias_;
};

// torch.nn.BatchNorm2d (Detectron2's "BN"): batch statistics in training, the running ones
// (momentum 0.1, the unbiased variance) updated; the running statistics in eval. eps 1e-5.
class BatchNorm2d : public NormLayer {
 public:
  explicit BatchNorm2d(int64_t channels);
  at::Tensor forward(const at::Tensor& x) override;

 protected:
  static constexpr double kEps = 1e-5;
  static constexpr double kMomentum = 0.1;
  at::Tensor weight_, bias_, running_mean_, running_var_;
};

// A sum over every process of the job, in place: the same length on every process, every
// process calling in the same order (the job's DataParallel::SumInPlace).
using CrossProcessSum = std::function<void(std::vector<double>&)>;

// torch.nn.SyncBatchNorm (Detectron2's "SyncBN"): in training with a group set, the batch
// statistics of all the job's processes together (W processes of batch B/W normalise as one of
// batch B; the gradients flow through the sums, which backward sums over the processes too);
// without a group, or in eval, BatchNorm2d. Every process must run the same SyncBN layers the
// same number of times per iteration; an empty local batch still takes part.
class SyncBatchNorm2d : public BatchNorm2d {
 public:
  using BatchNorm2d::BatchNorm2d;
  at::Tensor forward(const at::Tensor& x) override;
  void SetGroup(CrossProcessSum sum) { group_ = std::move(sum); }

 private:
  CrossProcessSum group_;
};

// Sets `sum` as the group of every SyncBatchNorm2d inside `model`; returns how many there are.
int64_t SetSyncBatchNormGroup(torch::nn::Module& model, const CrossProcessSum& sum);

// A norm by Detectron2's get_norm name, as ModelConfig::Validate admits them: nullptr for ""
// (no norm), FrozenBatchNorm2d for FrozenBN, GroupNorm2d with 32 groups for GN, BatchNorm2d
// for BN, SyncBatchNorm2d for SyncBN.
std::shared_ptr<NormLayer> MakeNormByName(const std::string& name, int64_t channels,
                                          double frozen_bn_eps);

// A 3x3 (or k x k) convolution as Detectron2's layers.Conv2d with `norm`: no bias under a norm,
// the norm registered inside the conv as "norm" (so state_dict keys are Detectron2's
// "<conv>.norm.weight"), FastConv applying it.
struct NormedConv {
  torch::nn::Conv2d conv{nullptr};
  FastConv fast;
};
NormedConv MakeNormedConv(int64_t in, int64_t out, int64_t k, int64_t stride, int64_t padding,
                          const std::string& norm, double frozen_bn_eps);

// Box predictor (torchvision FastRCNNPredictor): cls_score and bbox_pred. bbox_pred regresses
// one box per class (num_classes_with_background x 4 outputs), or one box for all classes
// (4 outputs) when class_agnostic (MODEL.ROI_BOX_HEAD.CLS_AGNOSTIC_BBOX_REG).
class FastRcnnPredictor : public torch::nn::Module {
 public:
  FastRcnnPredictor(int64_t in_features, int64_t num_classes_with_background,
                    bool class_agnostic = false);
  std::pair<at::Tensor, at::Tensor> Forward(const at::Tensor& x);

 private:
  torch::nn::Linear cls_score_{nullptr}, bbox_pred_{nullptr};
};

// Mask predictor (torchvision MaskRCNNPredictor): 2x deconv, ReLU, 1x1 logits per class.
class MaskRcnnPredictor : public torch::nn::Module {
 public:
  // mask_classes: num_classes_with_background, or 1 for a class-agnostic mask
  // (MODEL.ROI_MASK_HEAD.CLS_AGNOSTIC_MASK).
  MaskRcnnPredictor(int64_t in_channels, int64_t dim_reduced, int64_t mask_classes);
  // N×mask_classes×2R×2R logits for N×C×R×R mask features.
  at::Tensor Forward(const at::Tensor& x);
  // N×2R×2R logits of class labels[i] for RoI i only (inference; a class-agnostic predictor
  // gives its one channel for every label). On CPU in float32
  // without gradients the deconvolution runs as one GEMM per RoI whose output feeds the
  // label's 1×1 logits directly, skipping the interleaved 2R×2R feature map and the
  // logits of the other classes; elsewhere it is Forward(x) indexed by labels. Under a
  // bf16 CpuPrecisionScope the deconvolution is one oneDNN 1×1 convolution (bias and ReLU
  // fused) in bf16 and the logits come back bf16.
  at::Tensor LabelLogits(const at::Tensor& x, const at::Tensor& labels);

 private:
  torch::nn::ConvTranspose2d conv5_mask_{nullptr};
  torch::nn::Conv2d mask_fcn_logits_{nullptr};
  Bf16Copies bf16_;
};

// Freezes backbone parameters as torchvision's _resnet_fpn_extractor does for
// `trainable_layers` (0..5, counted from layer4 towards conv1; 5 also trains bn1).
void FreezeBackboneLayers(BackboneBody& body, int trainable_layers);

}  // namespace mrcnn::model
