#pragma once
// Keypoint R-CNN's part of the ROI heads (Detectron2's keypoint_rcnn_loss and
// keypoint_rcnn_inference): the keypoint head over the positive proposals (training: the
// heatmap loss) or over the detections (inference: keypoints decoded from the heatmaps).
// StandardRoiHeads calls them when it has a keypoint head (MODEL.KEYPOINT_ON).
#include <ATen/core/Tensor.h>

#include <map>
#include <string>
#include <vector>

#include "trainer/model/config.h"
#include "trainer/model/parts.h"
#include "trainer/model/structures.h"

namespace mrcnn::model {

// loss_keypoint over the rows the mask head would train on (MaskRows: sampled positives,
// padding rows marked invalid): Detectron2's keypoint_rcnn_loss. Its filter of positives
// with no visible keypoint in the box changes only which rows are computed, not the loss
// (such rows have no valid target), so the rows are taken as they are and no size
// depends on the data. Images without keypoint annotations count as all unlabelled.
at::Tensor KeypointRcnnLoss(const ModelConfig& c, KeypointHead& head,
                            const std::vector<at::Tensor>& maps, const std::vector<double>& scales,
                            const at::Tensor& rois, const std::vector<at::Tensor>& boxes,
                            const std::vector<at::Tensor>& matched, const at::Tensor& valid,
                            const std::vector<ImageTarget>& targets);
// Fills each detection's keypoints (N x K x 3: x, y in the resized image's continuous
// coordinates, and the score) from the heatmaps over its box.
void KeypointRcnnInference(const ModelConfig& c, KeypointHead& head,
                           const std::vector<at::Tensor>& maps, const std::vector<double>& scales,
                           const at::Tensor& rois, std::vector<ImageResult>& detections);

// Detectron2's heatmaps_to_keypoints: per RoI, the heatmaps (K x S x S logits) resized
// bicubically to the box's ceiled size, the peak of each, its position mapped back into the
// box (pixel centres at +0.5) and its score: the peak's softmax probability over the S x S
// heatmap. heatmaps N x K x S x S, boxes N x 4 -> N x K x 3 (x, y, score), float32.
at::Tensor HeatmapsToKeypoints(const at::Tensor& heatmaps, const at::Tensor& boxes);

// Detectron2's Keypoints.to_heatmap: each keypoint's cell in an S x S heatmap over its box
// (N x K int64, y * S + x) and whether it is a target (labelled and inside the box).
// keypoints N x K x 3, boxes N x 4.
std::pair<at::Tensor, at::Tensor> KeypointHeatmapTargets(const at::Tensor& keypoints,
                                                         const at::Tensor& boxes, int64_t side);

}  // namespace mrcnn::model
