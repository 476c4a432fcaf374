// Mask R-CNN's assembly and its image-wide stages: the parts built from the config, the
// transform (GeneralizedRCNNTransform), the features, the postprocess and forward(). The RPN
// is in rpn/rpn_stage.cpp, the ROI heads in roi_heads/; every step mirrors torchvision 0.26.
#include "trainer/model/mask_rcnn.h"

#include <torch/torch.h>

#include <cmath>
#include <tuple>

#include "kernels/ops.h"
#include "trainer/model/box_stage_ops.h"
#include "trainer/model/detectron2_mask_paste.h"
#include "trainer/model/registry.h"

namespace mrcnn::model {

// roi_heads/keypoint_head.cpp: roi_heads.keypoint_head and roi_heads.keypoint_predictor.
std::shared_ptr<KeypointHead> RegisterKeypointHead(torch::nn::Module& roi_heads,
                                                   const ModelConfig& config);
// retinanet/: the dense head (module "head") and its outputs on a FeatureStageOutput.
std::shared_ptr<RetinaNetHead> RegisterRetinaNetHead(torch::nn::Module& model,
                                                     const ModelConfig& config);
void RetinaNetHeadOutputs(MaskRcnnImpl& net, FeatureStageOutput& stage);

MaskRcnnImpl::MaskRcnnImpl(const ModelConfig& config) : config_(config) {
  config_.Validate("model config");
  rpn_box_loss_ = ParseBoxRegLoss(config_.rpn_bbox_reg_loss_type, "MODEL.RPN.BBOX_REG_LOSS_TYPE");
  box_loss_ = ParseBoxRegLoss(config_.bbox_reg_loss_type, "MODEL.ROI_BOX_HEAD.BBOX_REG_LOSS_TYPE");
  settings_.score_thresh = config_.box_score_thresh;
  settings_.detections_per_image = config_.detections_per_image;
  settings_.masks = config_.mask_on;

  auto backbone = register_module("backbone", std::make_shared<torch::nn::Module>("Backbone"));
  body_ = backbone->register_module("body", BackboneRegistry().Create(config_.backbone, config_));
  neck_ = backbone->register_module("fpn", NeckRegistry().Create(config_.neck, config_));
  FreezeBackboneLayers(*body_, config_.trainable_layers);
  if (config_.retinanet()) {
    // One stage: the dense head in place of the RPN, no ROI heads.
    settings_.score_thresh = config_.retinanet_score_thresh_test;
    settings_.masks = false;
    retinanet_head_ = RegisterRetinaNetHead(*this, config_);
    return;
  }

  auto rpn = register_module("rpn", std::make_shared<torch::nn::Module>("Rpn"));
  rpn_head_ = rpn->register_module("head", RpnHeadRegistry().Create(config_.rpn_head, config_));

  auto roi = register_module("roi_heads", std::make_shared<torch::nn::Module>("RoiHeads"));
  box_head_ = roi->register_module("box_head", BoxHeadRegistry().Create(config_.box_head, config_));
  box_predictor_ = roi->register_module(
      "box_predictor",
      std::make_shared<FastRcnnPredictor>(box_head_->RepresentationSize(), config_.num_classes + 1,
                                          config_.cls_agnostic_bbox_reg));
  if (config_.cascade()) {
    // Cascade R-CNN: stage 0 is the head above; stage s > 0 at roi_heads.cascade.{s}.
    auto cascade = roi->register_module("cascade", std::make_shared<torch::nn::Module>("Cascade"));
    for (size_t s = 1; s < config_.cascade_ious.size(); ++s) {
      auto stage = cascade->register_module(std::to_string(s),
                                            std::make_shared<torch::nn::Module>("CascadeStage"));
      cascade_box_heads_.push_back(
          stage->register_module("box_head", BoxHeadRegistry().Create(config_.box_head, config_)));
      cascade_box_predictors_.push_back(stage->register_module(
          "box_predictor",
          std::make_shared<FastRcnnPredictor>(cascade_box_heads_.back()->RepresentationSize(),
                                              config_.num_classes + 1, true)));
    }
  }
  if (config_.mask_on) {
    if (config_.mask_head == "res5") {
      // Res5ROIHeads: the mask predictor reads the box head's res5 trunk, whose parameters
      // are the box head's alone.
      auto res5 = std::dynamic_pointer_cast<Res5Head>(box_head_);
      TORCH_CHECK(res5 != nullptr, "MODEL.ROI_MASK_HEAD.NAME res5 needs the res5 box head (Res5ROIHeads)");
      mask_head_ = MaskHeadOnRes5(res5);
    } else {
      mask_head_ =
          roi->register_module("mask_head", MaskHeadRegistry().Create(config_.mask_head, config_));
    }
    mask_predictor_ = roi->register_module(
        "mask_predictor",
        std::make_shared<MaskRcnnPredictor>(mask_head_->OutChannels(), config_.mask_conv_dim,
                                            config_.num_classes + 1));
  }
  if (config_.keypoint_on)
    keypoint_head_ = RegisterKeypointHead(*roi, config_);
}

ImageBatch MaskRcnnImpl::Transform(const std::vector<at::Tensor>& images,
                                   std::vector<ImageTarget>* targets) {
  TORCH_CHECK(!images.empty(), "MaskRcnn: no images given");
  ImageBatch batch;
  std::vector<at::Tensor> resized;
  const auto& opts = images.front().options();
  std::vector<float> mean_v, std_v;
  for (int c = 0; c < 3; ++c) {
    mean_v.push_back(static_cast<float>(config_.pixel_mean[c] / 255.0));
    std_v.push_back(static_cast<float>(config_.pixel_std[c] / 255.0));
  }
  auto mean =
      torch::tensor(mean_v, torch::kFloat).to(opts.device()).to(opts.dtype()).view({3, 1, 1});
  auto stdv =
      torch::tensor(std_v, torch::kFloat).to(opts.device()).to(opts.dtype()).view({3, 1, 1});
  for (size_t i = 0; i < images.size(); ++i) {
    const at::Tensor& image = images[i];
    TORCH_CHECK(image.dim() == 3 && image.size(0) == 3, "MaskRcnn: image ", i,
                " must be 3 x H x W, got ", image.sizes());
    const int64_t h = image.size(1), w = image.size(2);
    batch.original_sizes.push_back({h, w});
    // Weights trained on BGR input (Detectron2's zoo) see the channels in that order; the
    // config's pixel statistics are then BGR too.
    at::Tensor normalised =
        ((config_.input_format == "BGR" ? image.flip({0}) : image) - mean) / stdv;
    int64_t min_size = config_.min_size_test;
    int64_t max_size = config_.max_size_test;
    if (is_training()) {
      const auto& choices = config_.min_size_train;
      min_size = choices[static_cast<size_t>(
          torch::randint(static_cast<int64_t>(choices.size()), {1}).item<int64_t>())];
      max_size = config_.max_size_train;
    }
    // Python's interpolate(scale_factor=s, recompute_scale_factor=True): size = floor(dim * s) in
    // double.
    const double scale =
        std::min(static_cast<double>(min_size) / static_cast<double>(std::min(h, w)),
                 static_cast<double>(max_size) / static_cast<double>(std::max(h, w)));
    const int64_t oh = static_cast<int64_t>(std::floor(static_cast<double>(h) * scale));
    const int64_t ow = static_cast<int64_t>(std::floor(static_cast<double>(w) * scale));
    at::Tensor out = at::upsample_bilinear2d(normalised.unsqueeze(0), {oh, ow}, false, std::nullopt,
                                             std::nullopt)[0];
    resized.push_back(out);
    batch.image_sizes.push_back({oh, ow});
    if (targets != nullptr) {
      ImageTarget& t = (*targets)[i];
      // resize_boxes: ratios new/old computed in float32.
      const float rh = static_cast<float>(oh) / static_cast<float>(h);
      const float rw = static_cast<float>(ow) / static_cast<float>(w);
      auto ratio = torch::tensor({rw, rh, rw, rh}, t.boxes.options().dtype(torch::kFloat))
                       .to(t.boxes.dtype());
      t.boxes = t.boxes * ratio;
      if (t.keypoints.defined()) {
        t.keypoints = t.keypoints * torch::tensor({rw, rh, 1.0f}, t.keypoints.options());
      }
      if (t.masks.defined() && t.masks.numel() > 0) {
        t.masks = at::upsample_nearest2d(t.masks.unsqueeze(1).to(torch::kFloat), {oh, ow},
                                         std::nullopt, std::nullopt)
                      .select(1, 0)
                      .to(torch::kByte);
      } else if (t.masks.defined()) {
        t.masks = torch::zeros({0, oh, ow}, t.masks.options());
      }
    }
  }
  int64_t max_h = 0, max_w = 0;
  for (const auto& s : batch.image_sizes) {
    max_h = std::max(max_h, s[0]);
    max_w = std::max(max_w, s[1]);
  }
  const double stride = config_.size_divisibility;
  max_h = static_cast<int64_t>(std::ceil(static_cast<double>(max_h) / stride) * stride);
  max_w = static_cast<int64_t>(std::ceil(static_cast<double>(max_w) / stride) * stride);
  batch.tensors = torch::zeros({static_cast<int64_t>(images.size()), 3, max_h, max_w},
                               resized.front().options());
  for (size_t i = 0; i < resized.size(); ++i) {
    using torch::indexing::Slice;
    batch.tensors[static_cast<int64_t>(i)]
        .index({Slice(), Slice(0, resized[i].size(1)), Slice(0, resized[i].size(2))})
        .copy_(resized[i]);
  }
  return batch;
}

std::vector<at::Tensor> MaskRcnnImpl::Features(const at::Tensor& batch) {
  // On CUDA the maps are channels-last from here on (convolutions, FPN, the RPN head, ROIAlign
  // and the mask head keep the layout): cuDNN's bf16/fp16 kernels work in NHWC and would
  // otherwise transform every planar input and output.
  std::vector<at::Tensor> body = body_->Forward(
      batch.is_cuda() && config_.channels_last ? batch.contiguous(at::MemoryFormat::ChannelsLast)
                                               : batch);
  Phase("backbone");
  std::vector<at::Tensor> pyramid = neck_->Forward(body);
  Phase("fpn");
  return pyramid;
}

FeatureStageOutput MaskRcnnImpl::FeatureStage(const at::Tensor& batch) {
  FeatureStageOutput out;
  out.features = Features(batch);
  if (config_.retinanet())
    RetinaNetHeadOutputs(*this, out);
  else
    std::tie(out.rpn_logits, out.rpn_deltas) = rpn_head_->Forward(out.features);
  return out;
}

std::vector<at::Tensor> MaskRcnnImpl::FeatureStageParameters() const {
  std::vector<at::Tensor> out;
  // RetinaNet's dense head is its "head" child (its type is the retinanet room's).
  const torch::nn::Module* dense_head =
      config_.retinanet() ? named_children()["head"].get()
                          : static_cast<const torch::nn::Module*>(rpn_head_.get());
  for (const auto* module : {static_cast<const torch::nn::Module*>(body_.get()),
                             static_cast<const torch::nn::Module*>(neck_.get()), dense_head}) {
    for (const at::Tensor& p : module->parameters())
      if (p.requires_grad())
        out.push_back(p);
  }
  return out;
}

std::optional<at::Generator> MaskRcnnImpl::SamplingGenerator(size_t image) const {
  if (sampling_generators_.empty())
    return std::nullopt;
  TORCH_CHECK(image < sampling_generators_.size(), "MaskRcnn: ", sampling_generators_.size(),
              " sampling generators for a batch with more images");
  return sampling_generators_[image];
}

std::map<std::string, at::Tensor> MaskRcnnImpl::RoiHeads(
    const std::vector<at::Tensor>& features, RpnOutput& rpn,
    const std::vector<std::array<int64_t, 2>>& image_sizes, const std::vector<ImageTarget>* targets,
    std::vector<ImageResult>* detections) {
  if (config_.retinanet()) {
    if (!is_training()) {
      TORCH_CHECK(detections != nullptr, "MaskRcnn: RoiHeads in eval mode needs a detections output");
      *detections = std::move(rpn.detections);
    }
    return {};
  }
  return RoiHeads(features, rpn.proposals, image_sizes, targets, detections,
                  is_training() ? &rpn.valid : nullptr);
}

void MaskRcnnImpl::Postprocess(const ImageBatch& batch,
                               std::vector<ImageResult>& detections) const {
  for (size_t i = 0; i < detections.size(); ++i) {
    ImageResult& r = detections[i];
    const auto& resized = batch.image_sizes[i];
    const auto& original = batch.original_sizes[i];
    const float rh = static_cast<float>(original[0]) / static_cast<float>(resized[0]);
    const float rw = static_cast<float>(original[1]) / static_cast<float>(resized[1]);
    auto ratio = torch::tensor({rw, rh, rw, rh}, r.boxes.options());
    r.boxes = r.boxes * ratio;
    if (r.keypoints.defined())
      r.keypoints = r.keypoints * torch::tensor({rw, rh, 1.0f}, r.keypoints.options());
    if (config_.detectron2()) {
      // detector_postprocess: clipped to the output image, and only non-empty boxes kept.
      r.boxes = ClipBoxes(r.boxes, original[0], original[1]);
      const at::Tensor keep = torch::where(
          (r.boxes.select(1, 2) - r.boxes.select(1, 0))
              .gt(0)
              .logical_and((r.boxes.select(1, 3) - r.boxes.select(1, 1)).gt(0)))[0];
      r.boxes = r.boxes.index_select(0, keep);
      r.scores = r.scores.index_select(0, keep);
      r.labels = r.labels.index_select(0, keep);
      if (r.masks.defined())
        r.masks = r.masks.index_select(0, keep);
      if (r.keypoints.defined())
        r.keypoints = r.keypoints.index_select(0, keep);
    }
    if (r.masks.defined() && settings_.paste_masks) {
      const bool binary = settings_.mask_threshold >= 0;
      if (r.masks.size(0) == 0) {
        r.masks = torch::zeros({0, 1, original[0], original[1]},
                               binary ? r.masks.options().dtype(torch::kByte) : r.masks.options());
      } else if (config_.detectron2()) {
        r.masks = PasteMasksDetectron2(r.masks, r.boxes, original[0], original[1],
                                       settings_.mask_threshold);
      } else if (binary) {
        r.masks = kernels::PasteMasksBinary(r.masks, r.boxes, original[0], original[1], 1,
                                            settings_.mask_threshold);
      } else {
        r.masks = kernels::PasteMasks(r.masks, r.boxes, original[0], original[1], 1);
      }
    }
  }
}

MaskRcnnOutput MaskRcnnImpl::forward(const std::vector<at::Tensor>& images,
                                     const std::optional<std::vector<ImageTarget>>& targets) {
  MaskRcnnOutput out;
  std::vector<ImageTarget> scaled;
  if (targets)
    scaled = *targets;
  TORCH_CHECK(!is_training() || targets.has_value(), "MaskRcnn: training mode needs targets");
  Phase(nullptr);
  ImageBatch batch = Transform(images, targets ? &scaled : nullptr);
  Phase("transform");
  std::vector<at::Tensor> features = Features(batch.tensors);
  RpnOutput rpn = Rpn(batch, features, is_training() ? &scaled : nullptr);
  Phase("rpn");
  if (is_training()) {
    out.losses = RoiHeads(features, rpn, batch.image_sizes, &scaled, nullptr);
    for (auto& [k, v] : rpn.losses)
      out.losses[k] = v;
  } else {
    RoiHeads(features, rpn, batch.image_sizes, nullptr, &out.detections);
    Postprocess(batch, out.detections);
    Phase("paste");
  }
  return out;
}

}  // namespace mrcnn::model
