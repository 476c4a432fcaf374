#pragma once
// Detectron2's weight names to this project's (torchvision-style, trainer/model/README.md
// "Model dir"), and the class-dependent layers re-laid out on the way. One table in the .cpp
// holds every rule:
//   backbone[.bottom_up].stem.conv1.weight      -> backbone.body.conv1.weight
//   backbone[.bottom_up].stem.conv1.norm.X      -> backbone.body.bn1.X
//   backbone[.bottom_up].res{s}.{b}.conv{k}.weight / .conv{k}.norm.X
//                                               -> backbone.body.layer{s-1}.{b}.conv{k}.weight /
//                                               .bn{k}.X
//   ... .shortcut.weight / .shortcut.norm.X     -> ... .downsample.0.weight / .downsample.1.X
//   roi_heads.res5.{b}.* (C4's head)            -> roi_heads.box_head.layer4.{b}.* (same block
//   rules) backbone.fpn_lateral{l}.X / fpn_output{l}.X -> backbone.fpn.inner_blocks.{l-2}.0.X /
//   layer_blocks.{l-2}.0.X proposal_generator.rpn_head.conv / objectness_logits / anchor_deltas
//                                               -> rpn.head.conv.0.0 / cls_logits / bbox_pred
//   roi_heads.box_head.fc1 / fc2                -> roi_heads.box_head.fc6 / fc7
//   roi_heads.box_predictor.cls_score           -> same name; background row moved from last to
//   first roi_heads.box_predictor.bbox_pred           -> same name; 4 zero rows (background) in
//   front, or a
//                                                  class-agnostic 4-row layer repeated for every
//                                                  class
//   roi_heads.mask_head.mask_fcn{i}             -> roi_heads.mask_head.{i-1}.0
//   roi_heads.mask_head.deconv                  -> roi_heads.mask_predictor.conv5_mask
//   roi_heads.mask_head.predictor               -> roi_heads.mask_predictor.mask_fcn_logits; a zero
//                                                  (background) channel in front, or a
//                                                  class-agnostic 1-channel layer repeated for
//                                                  every class
// Dropped on purpose: proposal_generator.anchor_generator.*, pixel_mean/pixel_std (the config
// sets them), *.num_batches_tracked, fc1000.* (an ImageNet classifier).
//
// Caffe2 files are renamed to Detectron2's names first (caffe2_names.h). Files that need
// matching heuristics (Caffe2's, or marked so) name weights without the model's prefix; it is
// supplied: stem/res2-4 -> the backbone, res5 -> the backbone when the model's backbone has a
// layer4, else the C4 box head; fpn_* -> backbone; box_head, cls_score/bbox_pred, mask_head
// -> roi_heads. Torch-free.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "trainer/model/weights/detectron2_checkpoint.h"
#include "trainer/model/weights/raw_tensor.h"

namespace mrcnn::model::weights {

// How a class-dependent layer is re-laid out from Detectron2's to ours.
enum class ClassLayout {
  kNone,
  kClassifier,  // K+1 rows, background last -> background first
  kBoxDeltas,   // 4K rows (no background) -> 4(K+1); or 4 class-agnostic rows -> repeated
  kMaskLogits,  // K channels (no background) -> K+1; or 1 class-agnostic channel -> repeated
};

struct NameMapping {
  std::string name;  // ours ("" when ignored)
  ClassLayout layout = ClassLayout::kNone;
  std::string ignored_because;  // set when the weight is dropped on purpose
};

// Our name for one full Detectron2 name (as in a Detectron2 model's state_dict); nullopt
// when no rule maps it.
std::optional<NameMapping> MapDetectron2Name(std::string_view detectron2_name);

// What Detectron2's matching heuristics make of a name without the model's prefix (see above);
// names that already have one come back unchanged.
std::string WithModelPrefix(const std::string& name, bool backbone_has_res5);

// Re-lays out `tensor` from Detectron2's layout to ours. `model_rows`: the first dimension
// the model has under our name, where known; it tells a class-agnostic layer from a
// class-specific one. Throws std::invalid_argument when the tensor has too few rows.
void RelayoutClassLayer(ClassLayout layout, RawTensor& tensor, std::optional<int64_t> model_rows);

// The model's tensors under our names, with their shapes: what the mapping needs to know
// of a model.
using ModelShapes = std::map<std::string, std::vector<int64_t>>;

struct MappedTensor {
  std::string checkpoint_key;  // the name in the file
  RawTensor tensor;            // re-laid out to ours
};

struct ShapeMismatch {
  std::string model_key;
  std::string checkpoint_key;
  std::vector<int64_t> file_shape;  // after the re-layout
  std::vector<int64_t> model_shape;
};

struct WeightMapping {
  // Our name -> tensor. With a model: only tensors the model has, in the model's shape.
  std::map<std::string, MappedTensor> tensors;
  std::vector<std::string> ignored;  // "key (why)": dropped on purpose
  // File keys no rule maps ("key"), or whose name the model lacks ("key -> ours").
  std::vector<std::string> unknown;
  // File keys inside a part every model of ours has by that name (backbone., proposal_generator.,
  // roi_heads., head.) that no rule maps: tensors of a block built otherwise than ours (a
  // deformable convolution's conv2_offset, a norm after an FPN or head convolution). Loading
  // the rest would give a model that predicts as if that block were plain.
  std::vector<std::string> unplaced;
  std::vector<ShapeMismatch> shape_mismatches;  // with a model: skipped, as Detectron2 does
  std::vector<std::string> missing;             // with a model: its keys the file does not give
  std::vector<std::string> notes;               // what was done beyond renaming
};

// Maps a checkpoint's tensors to our names. Without a model (nullptr) every mapped tensor is
// kept; with one, tensors are kept where the model has the name and the shape, and the
// model's frozen norms whose running_mean/running_var the file lacks (Caffe2's ImageNet
// backbones keep only scale and shift) get 0 and 1, as Detectron2's FrozenBatchNorm2d gives
// such checkpoints. Throws std::runtime_error naming the file when two of its keys map to
// the same name.
WeightMapping MapCheckpointToModel(Detectron2Checkpoint checkpoint, const ModelShapes* model);

// Keys grouped for a log: "prefix.* (N keys)" for keys sharing their first two name parts,
// the key itself when it is alone; at most `max_lines` lines (the last says how many more).
std::vector<std::string> GroupKeys(const std::vector<std::string>& keys, size_t max_lines = 20);

}  // namespace mrcnn::model::weights
