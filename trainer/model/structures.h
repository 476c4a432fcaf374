#pragma once
// What flows between the model's parts (Detectron2's structures/ and the dicts its
// meta-architectures exchange): the training targets, a preprocessed batch, the image-wide
// stage's maps, the proposals, the detections, and the model's output. Tensors only, so every
// room and the engine can include it without the network's modules.
#include <ATen/core/Tensor.h>

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mrcnn::model {

struct ImageTarget {
  at::Tensor boxes;   // G x 4 float, x1 y1 x2 y2 in the input image's pixels
  at::Tensor labels;  // G int64, 1..num_classes
  at::Tensor masks;   // G x H x W uint8 (0/1), required when MODEL.MASK_ON
  // G x K x 3 float (x, y, v: 0 unlabelled, 1 labelled hidden, 2 visible), required when
  // MODEL.KEYPOINT_ON; the transform scales x, y with the boxes.
  at::Tensor keypoints;
};

// One image's instances (Detectron2's Instances with pred_boxes, scores, pred_classes,
// pred_masks, pred_keypoints).
struct ImageResult {
  at::Tensor boxes;   // N x 4 float, original image pixels (resized-image ones before Postprocess)
  at::Tensor labels;  // N int64
  at::Tensor scores;  // N float
  at::Tensor masks;   // N x 1 x H x W float probabilities (undefined when masks are off)
  at::Tensor keypoints;  // N x K x 3 float (x, y, score) when MODEL.KEYPOINT_ON, else undefined
};

// Normalised, resized images padded into one tensor; image_sizes are the resized sizes
// before padding (height, width), original_sizes the sizes given to forward().
struct ImageBatch {
  at::Tensor tensors;
  std::vector<std::array<int64_t, 2>> image_sizes;
  std::vector<std::array<int64_t, 2>> original_sizes;
};

// What the image-wide part of the network computes for a batch: every pyramid level (finest
// first) and the dense head's outputs per level (the RPN's objectness logits and box deltas,
// or RetinaNet's class logits and box deltas). Its sizes depend only on the batch tensor's
// shape, which is what lets the trainer capture it in a CUDA graph per padded shape
// (engine/cuda_graphs).
struct FeatureStageOutput {
  std::vector<at::Tensor> features, head_logits, head_deltas;
};

// A proposal generator's output.
struct RpnOutput {
  std::vector<at::Tensor> proposals;         // per image, K x 4 in resized-image pixels
  std::vector<at::Tensor> scores;            // per image, K (sigmoid objectness)
  std::map<std::string, at::Tensor> losses;  // loss_objectness, loss_rpn_box_reg (train only)
  // Training: per image, bool K, false for padding rows. The training step selects a fixed
  // number of proposals (a size known on the host, so no wait for the device): the kept
  // ones first, by score, then padding. Empty in eval mode, where every row is a proposal.
  std::vector<at::Tensor> valid;
};

// One image's outputs (Detectron2's per-image output dict). Each meta-architecture fills what
// it predicts; one that predicts more (a semantic map, panoptic segments, proposals) adds its
// field here, and the callers that read `instances` stay as they are.
struct ImageOutput {
  ImageResult instances;
};

struct ModelOutput {
  std::map<std::string, at::Tensor> losses;  // train mode
  std::vector<ImageOutput> images;           // eval mode, one per input image, in order
};

// Every image's instances, moved out of `out`.
std::vector<ImageResult> TakeInstances(ModelOutput&& out);

// Inference-time switches that do not change the weights.
struct DetectionSettings {
  double score_thresh = 0.05;
  int detections_per_image = 100;
  bool masks = true;
  // >= 0: masks come back pasted as uint8 0/1 (mask >= threshold); < 0: as probabilities.
  double mask_threshold = -1.0;
  // false: masks come back as the mask head's N x 1 x R x R probabilities for the boxes
  // (in original pixels), unpasted, so a caller can paste each one into its box only
  // (tiled inference: a full-image mask per detection of an 8000x6000 image is 48 MB).
  bool paste_masks = true;
};

}  // namespace mrcnn::model
