// The meta-architectures' shared stages: the transform (GeneralizedRCNNTransform), the
// backbone's features, the postprocess (detector_postprocess, the mask paste) and forward().
// Every step mirrors torchvision 0.26, or Detectron2 under its convention.
#include "trainer/model/meta_arch/meta_arch.h"

#include <torch/torch.h>

#include <cmath>

#include "kernels/ops.h"
#include "trainer/model/backbone/backbone.h"
#include "trainer/model/box_stage_ops.h"
#include "trainer/model/detectron2_mask_paste.h"

namespace mrcnn::model {

std::vector<ImageResult> TakeInstances(ModelOutput&& out) {
  std::vector<ImageResult> instances;
  instances.reserve(out.images.size());
  for (ImageOutput& image : out.images)
    instances.push_back(std::move(image.instances));
  return instances;
}

MetaArchitecture::MetaArchitecture(const ModelConfig& config)
    : config_(config), context_(std::make_shared<ForwardContext>()) {
  config_.Validate("model config");
  context_->settings.score_thresh = config_.box_score_thresh;
  context_->settings.detections_per_image = config_.detections_per_image;
  context_->settings.masks = config_.mask_on;
  backbone_ = register_module("backbone", std::make_shared<Backbone>(config_, context_));
}

namespace {

// GeneralizedRCNNTransform's resize_boxes, keypoints and nearest mask resize of one image's
// target to oh x ow (ratios new/old computed in float32).
void ResizeTarget(ImageTarget& t, int64_t h, int64_t w, int64_t oh, int64_t ow) {
  const float rh = static_cast<float>(oh) / static_cast<float>(h);
  const float rw = static_cast<float>(ow) / static_cast<float>(w);
  auto ratio =
      torch::tensor({rw, rh, rw, rh}, t.boxes.options().dtype(torch::kFloat)).to(t.boxes.dtype());
  t.boxes = t.boxes * ratio;
  if (t.keypoints.defined()) {
    t.keypoints = t.keypoints * torch::tensor({rw, rh, 1.0f}, t.keypoints.options());
  }
  if (t.masks.defined() && t.masks.numel() > 0) {
    t.masks = at::upsample_nearest2d(t.masks.unsqueeze(1).to(torch::kFloat), {oh, ow}, std::nullopt,
                                     std::nullopt)
                  .select(1, 0)
                  .to(torch::kByte);
  } else if (t.masks.defined()) {
    t.masks = torch::zeros({0, oh, ow}, t.masks.options());
  }
}

// The images zero-padded bottom/right into one tensor whose sides are multiples of stride.
at::Tensor PadBatch(const std::vector<at::Tensor>& images,
                    const std::vector<std::array<int64_t, 2>>& sizes, double stride) {
  int64_t max_h = 0, max_w = 0;
  for (const auto& s : sizes) {
    max_h = std::max(max_h, s[0]);
    max_w = std::max(max_w, s[1]);
  }
  max_h = static_cast<int64_t>(std::ceil(static_cast<double>(max_h) / stride) * stride);
  max_w = static_cast<int64_t>(std::ceil(static_cast<double>(max_w) / stride) * stride);
  at::Tensor batch = torch::zeros({static_cast<int64_t>(images.size()), 3, max_h, max_w},
                                  images.front().options());
  for (size_t i = 0; i < images.size(); ++i) {
    using torch::indexing::Slice;
    batch[static_cast<int64_t>(i)]
        .index({Slice(), Slice(0, images[i].size(1)), Slice(0, images[i].size(2))})
        .copy_(images[i]);
  }
  return batch;
}

}  // namespace

std::array<int64_t, 2> MetaArchitecture::TorchvisionResizedSize(int64_t h, int64_t w) const {
  int64_t min_size = config_.min_size_test;
  int64_t max_size = config_.max_size_test;
  if (is_training()) {
    const auto& sizes = config_.min_size_train;
    if (config_.min_size_train_sampling == "range") {
      min_size = torch::randint(sizes.front(), sizes.back() + 1, {1}).item<int64_t>();
    } else {
      min_size = sizes[static_cast<size_t>(
          torch::randint(static_cast<int64_t>(sizes.size()), {1}).item<int64_t>())];
    }
    max_size = config_.max_size_train;
  }
  // Python's interpolate(scale_factor=s, recompute_scale_factor=True): size = floor(dim * s) in
  // double.
  const double scale =
      std::min(static_cast<double>(min_size) / static_cast<double>(std::min(h, w)),
               static_cast<double>(max_size) / static_cast<double>(std::max(h, w)));
  return {static_cast<int64_t>(std::floor(static_cast<double>(h) * scale)),
          static_cast<int64_t>(std::floor(static_cast<double>(w) * scale))};
}

ImageBatch MetaArchitecture::Transform(const std::vector<at::Tensor>& images,
                                       std::vector<ImageTarget>* targets) {
  TORCH_CHECK(!images.empty(), "model: no images given");
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
    TORCH_CHECK(image.dim() == 3 && image.size(0) == 3, "model: image ", i,
                " must be 3 x H x W, got ", image.sizes());
    const int64_t h = image.size(1), w = image.size(2);
    batch.original_sizes.push_back({h, w});
    // Weights trained on BGR input (Detectron2's zoo) see the channels in that order; the
    // config's pixel statistics are then BGR too.
    at::Tensor normalised =
        ((config_.input_format == "BGR" ? image.flip({0}) : image) - mean) / stdv;
    if (config_.detectron2()) {
      // Detectron2's models never resize: its mapper (training, evaluation) and
      // DefaultPredictor hand them resized images, and so do ours (transforms.h,
      // inference/model_input.h). One resize, with one size drawn per image.
      resized.push_back(normalised);
      batch.image_sizes.push_back({h, w});
      continue;
    }
    const auto [oh, ow] = TorchvisionResizedSize(h, w);
    resized.push_back(at::upsample_bilinear2d(normalised.unsqueeze(0), {oh, ow}, false,
                                              std::nullopt, std::nullopt)[0]);
    batch.image_sizes.push_back({oh, ow});
    if (targets != nullptr)
      ResizeTarget((*targets)[i], h, w, oh, ow);
  }
  batch.tensors = PadBatch(resized, batch.image_sizes, config_.size_divisibility);
  return batch;
}

void MetaArchitecture::Postprocess(const ImageBatch& batch,
                                   std::vector<ImageResult>& detections) const {
  const DetectionSettings& settings = context_->settings;
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
      const at::Tensor keep =
          torch::where((r.boxes.select(1, 2) - r.boxes.select(1, 0))
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
    if (r.masks.defined() && settings.paste_masks) {
      const bool binary = settings.mask_threshold >= 0;
      if (r.masks.size(0) == 0) {
        r.masks = torch::zeros({0, 1, original[0], original[1]},
                               binary ? r.masks.options().dtype(torch::kByte) : r.masks.options());
      } else if (config_.detectron2()) {
        r.masks = PasteMasksDetectron2(r.masks, r.boxes, original[0], original[1],
                                       settings.mask_threshold);
      } else if (binary) {
        r.masks = kernels::PasteMasksBinary(r.masks, r.boxes, original[0], original[1], 1,
                                            settings.mask_threshold);
      } else {
        r.masks = kernels::PasteMasks(r.masks, r.boxes, original[0], original[1], 1);
      }
    }
  }
}

std::vector<at::Tensor> MetaArchitecture::Features(const at::Tensor& batch) {
  return backbone_->Forward(batch);
}

void MetaArchitecture::Postprocess(const ImageBatch& batch, ModelOutput& out) const {
  std::vector<ImageResult> instances;
  for (ImageOutput& image : out.images)
    instances.push_back(std::move(image.instances));
  Postprocess(batch, instances);
  for (size_t i = 0; i < instances.size(); ++i)
    out.images[i].instances = std::move(instances[i]);
}

ModelOutput MetaArchitecture::forward(const std::vector<at::Tensor>& images,
                                      const std::optional<std::vector<ImageTarget>>& targets,
                                      const std::vector<std::array<int64_t, 2>>& output_sizes) {
  std::vector<ImageTarget> scaled;
  if (targets)
    scaled = *targets;
  TORCH_CHECK(!is_training() || targets.has_value(), "model: training mode needs targets");
  context_->Phase(nullptr);
  TORCH_CHECK(output_sizes.empty() || output_sizes.size() == images.size(),
              "model: ", output_sizes.size(), " output sizes for ", images.size(), " images");
  ImageBatch batch = Transform(images, targets ? &scaled : nullptr);
  if (!output_sizes.empty())
    batch.original_sizes = output_sizes;
  context_->Phase("transform");
  const FeatureStageOutput stage = FeatureStage(batch.tensors);
  ModelOutput out = Heads(batch, stage, is_training() ? &scaled : nullptr);
  if (!is_training()) {
    Postprocess(batch, out);
    context_->Phase("paste");
  }
  return out;
}

}  // namespace mrcnn::model
