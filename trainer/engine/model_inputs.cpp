#include "trainer/engine/model_inputs.h"

namespace mrcnn::engine {

data::Normalization NormalizationOf(const model::ModelConfig& mc) {
  data::Normalization n;
  for (int c = 0; c < 3; ++c) {
    n.mean[c] = static_cast<float>(mc.pixel_mean[c] / 255.0);
    n.std[c] = static_cast<float>(mc.pixel_std[c] / 255.0);
  }
  return n;
}

data::ResizeFilter ResizeFilterOf(const model::ModelConfig& mc) {
  return mc.detectron2() ? data::ResizeFilter::kPilBilinear : data::ResizeFilter::kOpenCvBilinear;
}

model::ImageBatch ToImageBatch(const data::Batch& batch, const c10::Device& device) {
  model::ImageBatch out;
  out.tensors = batch.images.to(device, /*non_blocking=*/true);
  out.image_sizes = batch.image_sizes;
  out.original_sizes = batch.original_sizes;
  return out;
}

std::vector<model::ImageTarget> ToTargets(const data::Batch& batch, const c10::Device& device) {
  std::vector<model::ImageTarget> targets;
  targets.reserve(batch.targets.size());
  for (const auto& t : batch.targets) {
    // Asynchronous: a blocking host-to-device copy waits for everything queued on the
    // device before it. The loader's tensors are pageable, so CUDA stages them at once and
    // they may be freed as soon as the call returns.
    targets.push_back(
        {t.boxes.to(device, /*non_blocking=*/true), t.labels.to(device, /*non_blocking=*/true),
         t.masks.defined() ? t.masks.to(device, /*non_blocking=*/true) : t.masks,
         t.keypoints.defined() ? t.keypoints.to(device, /*non_blocking=*/true) : t.keypoints});
  }
  return targets;
}

}  // namespace mrcnn::engine
