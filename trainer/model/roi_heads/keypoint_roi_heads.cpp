// Keypoint R-CNN's targets, loss and decoding (keypoint_roi_heads.h).
#include "trainer/model/roi_heads/keypoint_roi_heads.h"

#include <torch/torch.h>

#include <cmath>

#include "kernels/ops.h"

namespace mrcnn::model {

std::pair<at::Tensor, at::Tensor> KeypointHeatmapTargets(const at::Tensor& keypoints,
                                                         const at::Tensor& boxes, int64_t side) {
  const auto s = static_cast<double>(side);
  const at::Tensor x1 = boxes.select(1, 0).unsqueeze(1), y1 = boxes.select(1, 1).unsqueeze(1);
  const at::Tensor x2 = boxes.select(1, 2).unsqueeze(1), y2 = boxes.select(1, 3).unsqueeze(1);
  const at::Tensor x = keypoints.select(2, 0), y = keypoints.select(2, 1);
  // A point on the box's right or bottom edge falls into the last cell, not outside.
  at::Tensor cx = ((x - x1) * (s / (x2 - x1))).floor().to(torch::kLong);
  at::Tensor cy = ((y - y1) * (s / (y2 - y1))).floor().to(torch::kLong);
  cx = at::where(x.eq(x2), side - 1, cx);
  cy = at::where(y.eq(y2), side - 1, cy);
  const at::Tensor valid = cx.ge(0)
                               .logical_and(cy.ge(0))
                               .logical_and(cx.lt(side))
                               .logical_and(cy.lt(side))
                               .logical_and(keypoints.select(2, 2).gt(0));
  const at::Tensor cell = at::where(valid, cy * side + cx, 0);
  return {cell, valid};
}

at::Tensor HeatmapsToKeypoints(const at::Tensor& heatmaps, const at::Tensor& boxes) {
  const int64_t n = heatmaps.size(0), k = heatmaps.size(1);
  at::Tensor out = torch::zeros({n, k, 3}, heatmaps.options().dtype(torch::kFloat));
  if (n == 0)
    return out;
  const at::Tensor maps = heatmaps.to(torch::kFloat);
  const at::Tensor b = boxes.to(torch::kFloat);
  const at::Tensor widths = (b.select(1, 2) - b.select(1, 0)).clamp_min(1);
  const at::Tensor heights = (b.select(1, 3) - b.select(1, 1)).clamp_min(1);
  const at::Tensor widths_ceil = widths.ceil(), heights_ceil = heights.ceil();
  const at::Tensor sizes = torch::stack({heights_ceil, widths_ceil}, 1).to(torch::kCPU);
  const at::Tensor width_corr = widths / widths_ceil, height_corr = heights / heights_ceil;
  auto size = sizes.accessor<float, 2>();
  for (int64_t i = 0; i < n; ++i) {
    const auto h = static_cast<int64_t>(size[i][0]), w = static_cast<int64_t>(size[i][1]);
    const at::Tensor roi_map =
        at::upsample_bicubic2d(maps.narrow(0, i, 1), {h, w}, /*align_corners=*/false)[0];
    const at::Tensor flat = roi_map.reshape({k, -1});
    const auto [peak, pos] = flat.max(1);
    // The peak's probability under a softmax over the heatmap at its own resolution, with
    // the peak's value from the resized map (Detectron2's score).
    const at::Tensor denominator = (maps[i] - peak.view({k, 1, 1})).exp().sum({1, 2});
    const at::Tensor score = 1.0 / denominator;
    const at::Tensor xi = pos.remainder(w), yi = pos.div(w, "floor");
    out[i].select(1, 0).copy_((xi.to(torch::kFloat) + 0.5) * width_corr[i] + b[i][0]);
    out[i].select(1, 1).copy_((yi.to(torch::kFloat) + 0.5) * height_corr[i] + b[i][1]);
    out[i].select(1, 2).copy_(score);
  }
  return out;
}

at::Tensor KeypointRcnnLoss(const ModelConfig& c, KeypointHead& head,
                            const std::vector<at::Tensor>& maps, const std::vector<double>& scales,
                            const at::Tensor& rois, const std::vector<at::Tensor>& boxes,
                            const std::vector<at::Tensor>& matched, const at::Tensor& valid,
                            const std::vector<ImageTarget>& targets) {
  const int64_t side = 4 * c.keypoint_pooler_resolution;
  const at::Tensor pooled = kernels::MultiLevelRoiAlign(
      maps, rois, scales, c.keypoint_pooler_resolution, c.keypoint_pooler_resolution,
      c.keypoint_pooler_sampling_ratio, c.keypoint_pooler_aligned);
  const at::Tensor logits = head.Forward(pooled).to(torch::kFloat);
  std::vector<at::Tensor> cells, point_valid;
  for (size_t i = 0; i < boxes.size(); ++i) {
    const at::Tensor& gt = targets[i].keypoints;
    const at::Tensor points =
        gt.defined() && gt.size(0) > 0
            ? gt.to(boxes[i].device(), torch::kFloat).index_select(0, matched[i])
            : torch::zeros({boxes[i].size(0), c.num_keypoints, 3}, boxes[i].options());
    TORCH_CHECK(
        points.size(1) == c.num_keypoints, "Keypoint R-CNN: the targets have ", points.size(1),
        " keypoints per instance, MODEL.ROI_KEYPOINT_HEAD.NUM_KEYPOINTS is ", c.num_keypoints);
    auto [cell, ok] = KeypointHeatmapTargets(points, boxes[i], side);
    cells.push_back(cell);
    point_valid.push_back(ok);
  }
  const at::Tensor cell = torch::cat(cells).reshape({-1});
  const at::Tensor ok = torch::cat(point_valid).logical_and(valid.unsqueeze(1)).reshape({-1});
  const at::Tensor ce = torch::nn::functional::cross_entropy(
      logits.reshape({-1, side * side}), cell,
      torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
  const at::Tensor sum = at::where(ok, ce, at::zeros({}, ce.options())).sum();
  // Normalised by the visible keypoints in the batch (no host read: with none, the sum is 0
  // and so is the loss), or by Detectron2's fixed count per image.
  const at::Tensor normalizer =
      c.keypoint_normalize_by_visible
          ? ok.sum().to(torch::kFloat).clamp_min(1)
          : torch::full({},
                        static_cast<double>(targets.size()) * c.num_keypoints *
                            c.box_batch_size_per_image * c.box_positive_fraction,
                        ce.options());
  return sum / normalizer * c.keypoint_loss_weight;
}

void KeypointRcnnInference(const ModelConfig& c, KeypointHead& head,
                           const std::vector<at::Tensor>& maps, const std::vector<double>& scales,
                           const at::Tensor& rois, std::vector<ImageResult>& detections) {
  at::Tensor points;
  if (rois.size(0) > 0) {
    const at::Tensor pooled = kernels::MultiLevelRoiAlign(
        maps, rois, scales, c.keypoint_pooler_resolution, c.keypoint_pooler_resolution,
        c.keypoint_pooler_sampling_ratio, c.keypoint_pooler_aligned);
    points = HeatmapsToKeypoints(head.Forward(pooled), rois.narrow(1, 1, 4));
  } else {
    points = torch::zeros({0, c.num_keypoints, 3}, rois.options().dtype(torch::kFloat));
  }
  int64_t start = 0;
  for (ImageResult& r : detections) {
    const int64_t count = r.boxes.size(0);
    r.keypoints = points.narrow(0, start, count);
    start += count;
  }
}

}  // namespace mrcnn::model
