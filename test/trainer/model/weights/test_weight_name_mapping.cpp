// Detectron2 and Caffe2 names to ours, the class-dependent layers' re-layout, and what a
// checkpoint mapped onto a model's names and shapes keeps, skips and fills in.
#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <vector>

#include "trainer/model/weights/caffe2_names.h"
#include "trainer/model/weights/tensor_rows.h"
#include "trainer/model/weights/weight_name_mapping.h"

using namespace mrcnn::model::weights;

namespace {

std::string Ours(const std::string& detectron2) {
  const auto mapping = MapDetectron2Name(detectron2);
  if (!mapping)
    return "<none>";
  return mapping->ignored_because.empty() ? mapping->name : "<ignored>";
}

// A float32 tensor whose row r holds the value r + 1 in every element.
RawTensor Rows(std::vector<int64_t> shape) {
  RawTensor t;
  t.shape = std::move(shape);
  const int64_t n = CheckedNumElements(t.shape);
  const int64_t per_row = t.shape.empty() || t.shape[0] == 0 ? 1 : n / t.shape[0];
  t.bytes.resize(static_cast<size_t>(n) * 4);
  for (int64_t i = 0; i < n; ++i) {
    const float v = static_cast<float>(i / per_row + 1);
    std::memcpy(t.bytes.data() + i * 4, &v, 4);
  }
  return t;
}

// The value of each row (its first element).
std::vector<double> RowValues(const RawTensor& t) {
  std::vector<double> out;
  const int64_t per_row = t.NumElements() / t.shape[0];
  for (int64_t r = 0; r < t.shape[0]; ++r)
    out.push_back(t.ElementAsDouble(r * per_row));
  return out;
}

}  // namespace

TEST_CASE("Detectron2 names map to ours by one table", "[mapping]") {
  // FPN models: the body under backbone.bottom_up.
  CHECK(Ours("backbone.bottom_up.stem.conv1.weight") == "backbone.body.conv1.weight");
  CHECK(Ours("backbone.bottom_up.stem.conv1.norm.running_var") == "backbone.body.bn1.running_var");
  CHECK(Ours("backbone.bottom_up.res2.0.conv1.weight") == "backbone.body.layer1.0.conv1.weight");
  CHECK(Ours("backbone.bottom_up.res3.3.conv3.norm.bias") == "backbone.body.layer2.3.bn3.bias");
  CHECK(Ours("backbone.bottom_up.res4.0.shortcut.weight") ==
        "backbone.body.layer3.0.downsample.0.weight");
  CHECK(Ours("backbone.bottom_up.res5.0.shortcut.norm.weight") ==
        "backbone.body.layer4.0.downsample.1.weight");
  CHECK(Ours("backbone.bottom_up.res4.22.conv2.norm.running_mean") ==
        "backbone.body.layer3.22.bn2.running_mean");
  CHECK(Ours("backbone.fpn_lateral2.weight") == "backbone.fpn.inner_blocks.0.0.weight");
  CHECK(Ours("backbone.fpn_lateral5.bias") == "backbone.fpn.inner_blocks.3.0.bias");
  CHECK(Ours("backbone.fpn_output3.weight") == "backbone.fpn.layer_blocks.1.0.weight");
  CHECK(Ours("proposal_generator.rpn_head.conv.weight") == "rpn.head.conv.0.0.weight");
  CHECK(Ours("proposal_generator.rpn_head.objectness_logits.bias") == "rpn.head.cls_logits.bias");
  CHECK(Ours("proposal_generator.rpn_head.anchor_deltas.weight") == "rpn.head.bbox_pred.weight");
  CHECK(Ours("roi_heads.box_head.fc1.weight") == "roi_heads.box_head.fc6.weight");
  CHECK(Ours("roi_heads.box_head.fc2.bias") == "roi_heads.box_head.fc7.bias");
  CHECK(Ours("roi_heads.box_predictor.cls_score.weight") ==
        "roi_heads.box_predictor.cls_score.weight");
  CHECK(Ours("roi_heads.box_predictor.bbox_pred.bias") == "roi_heads.box_predictor.bbox_pred.bias");
  CHECK(Ours("roi_heads.mask_head.mask_fcn1.weight") == "roi_heads.mask_head.0.0.weight");
  CHECK(Ours("roi_heads.mask_head.mask_fcn4.bias") == "roi_heads.mask_head.3.0.bias");
  CHECK(Ours("roi_heads.mask_head.deconv.weight") == "roi_heads.mask_predictor.conv5_mask.weight");
  CHECK(Ours("roi_heads.mask_head.predictor.bias") ==
        "roi_heads.mask_predictor.mask_fcn_logits.bias");
  // C4 and DC5: no FPN, so no bottom_up; C4's res5 is the box head's.
  CHECK(Ours("backbone.stem.conv1.norm.weight") == "backbone.body.bn1.weight");
  CHECK(Ours("backbone.res4.5.conv2.weight") == "backbone.body.layer3.5.conv2.weight");
  CHECK(Ours("backbone.res5.2.conv3.norm.bias") == "backbone.body.layer4.2.bn3.bias");
  CHECK(Ours("roi_heads.res5.0.shortcut.norm.running_var") ==
        "roi_heads.box_head.layer4.0.downsample.1.running_var");
  CHECK(Ours("roi_heads.res5.2.conv1.weight") == "roi_heads.box_head.layer4.2.conv1.weight");
  // Dropped on purpose, and unknown.
  CHECK(Ours("proposal_generator.anchor_generator.cell_anchors.0") == "<ignored>");
  CHECK(Ours("pixel_mean") == "<ignored>");
  CHECK(Ours("backbone.bottom_up.res2.0.conv1.norm.num_batches_tracked") == "<ignored>");
  CHECK(Ours("roi_heads.keypoint_head.conv_fcn1.weight") == "roi_heads.keypoint_head.0.weight");
  CHECK(Ours("roi_heads.keypoint_head.conv_fcn8.bias") == "roi_heads.keypoint_head.14.bias");
  CHECK(Ours("roi_heads.keypoint_head.score_lowres.weight") ==
        "roi_heads.keypoint_predictor.kps_score_lowres.weight");
  CHECK(Ours("roi_heads.keypoint_head.conv_fcn0.weight") == "<none>");  // 1-based: no conv 0
  CHECK(Ours("sem_seg_head.predictor.weight") == "<none>");  // Panoptic FPN's: not ours
  // A conv's norm is inside our conv too (MODEL.FPN.NORM, ROI_*_HEAD.NORM).
  CHECK(Ours("backbone.fpn_lateral2.norm.weight") == "backbone.fpn.inner_blocks.0.0.norm.weight");
  CHECK(Ours("roi_heads.box_head.conv4.norm.bias") == "roi_heads.box_head.conv4.norm.bias");
  CHECK(Ours("roi_heads.box_head.2.conv1.weight") == "roi_heads.cascade.2.box_head.conv1.weight");
  CHECK(Ours("roi_heads.mask_head.mask_fcn8.norm.weight") == "roi_heads.mask_head.7.0.norm.weight");
  // A deformable block's offset conv.
  CHECK(Ours("backbone.bottom_up.res3.0.conv2_offset.weight") ==
        "backbone.body.layer2.0.conv2_offset.weight");
  CHECK(Ours("backbone.bottom_up.res5.2.conv2_offset.bias") == "backbone.body.layer4.2.conv2_offset.bias");
  CHECK(Ours("backbone.fpn_lateral1.weight") == "<none>");       // no level 1
  CHECK(Ours("backbone.bottom_up.res2.0.conv1.bias") == "<none>");
  CHECK(Ours("roi_heads.box_predictor.cls_score.weight.extra") == "<none>");
  // The class-dependent layers say how they are re-laid out.
  CHECK(MapDetectron2Name("roi_heads.box_predictor.cls_score.bias")->layout ==
        ClassLayout::kClassifier);
  CHECK(MapDetectron2Name("roi_heads.box_predictor.bbox_pred.weight")->layout ==
        ClassLayout::kBoxDeltas);
  CHECK(MapDetectron2Name("roi_heads.mask_head.predictor.weight")->layout ==
        ClassLayout::kMaskLogits);
  CHECK(MapDetectron2Name("roi_heads.mask_head.deconv.weight")->layout == ClassLayout::kNone);
}

TEST_CASE("Caffe2 blob names become Detectron2's", "[caffe2]") {
  // ImageNet backbones (MSRA, FAIR X-101-32x8d).
  CHECK(Caffe2NameToDetectron2("conv1_w") == "stem.conv1.weight");
  CHECK(Caffe2NameToDetectron2("res_conv1_bn_s") == "stem.conv1.norm.weight");
  CHECK(Caffe2NameToDetectron2("res_conv1_bn_b") == "stem.conv1.norm.bias");
  CHECK(Caffe2NameToDetectron2("res_conv1_bn_rm") == "stem.conv1.norm.running_mean");
  CHECK(Caffe2NameToDetectron2("res_conv1_bn_riv") == "stem.conv1.norm.running_var");
  CHECK(Caffe2NameToDetectron2("res2_0_branch2a_w") == "res2.0.conv1.weight");
  CHECK(Caffe2NameToDetectron2("res2_0_branch2b_bn_s") == "res2.0.conv2.norm.weight");
  CHECK(Caffe2NameToDetectron2("res5_2_branch2c_bn_b") == "res5.2.conv3.norm.bias");
  CHECK(Caffe2NameToDetectron2("res3_0_branch1_w") == "res3.0.shortcut.weight");
  CHECK(Caffe2NameToDetectron2("res4_22_branch1_bn_s") == "res4.22.shortcut.norm.weight");
  CHECK(Caffe2NameToDetectron2("res2_1_branch2a_gn_s") == "res2.1.conv1.norm.weight");
  CHECK(Caffe2NameToDetectron2("fc1000_w") == "fc1000.weight");
  // Detectron1 detection models.
  CHECK(Caffe2NameToDetectron2("fpn_inner_res5_2_sum_w") == "fpn_lateral5.weight");
  CHECK(Caffe2NameToDetectron2("fpn_inner_res2_2_sum_lateral_b") == "fpn_lateral2.bias");
  CHECK(Caffe2NameToDetectron2("fpn_res3_3_sum_w") == "fpn_output3.weight");
  CHECK(Caffe2NameToDetectron2("conv_rpn_fpn2_w") == "proposal_generator.rpn_head.conv.weight");
  CHECK(Caffe2NameToDetectron2("rpn_cls_logits_fpn2_b") ==
        "proposal_generator.rpn_head.objectness_logits.bias");
  CHECK(Caffe2NameToDetectron2("rpn_bbox_pred_fpn2_w") ==
        "proposal_generator.rpn_head.anchor_deltas.weight");
  CHECK(Caffe2NameToDetectron2("conv_rpn_w") == "proposal_generator.rpn_head.conv.weight");
  CHECK(Caffe2NameToDetectron2("rpn_cls_logits_w") ==
        "proposal_generator.rpn_head.objectness_logits.weight");
  CHECK(Caffe2NameToDetectron2("fc6_w") == "box_head.fc1.weight");
  CHECK(Caffe2NameToDetectron2("fc7_b") == "box_head.fc2.bias");
  CHECK(Caffe2NameToDetectron2("cls_score_w") == "cls_score.weight");
  CHECK(Caffe2NameToDetectron2("bbox_pred_b") == "bbox_pred.bias");
  CHECK(Caffe2NameToDetectron2("_[mask]_fcn1_w") == "mask_head.mask_fcn1.weight");
  CHECK(Caffe2NameToDetectron2("_[mask]_fcn4_b") == "mask_head.mask_fcn4.bias");
  CHECK(Caffe2NameToDetectron2("conv5_mask_w") == "mask_head.deconv.weight");
  CHECK(Caffe2NameToDetectron2("mask_fcn_logits_w") == "mask_head.predictor.weight");

  // Caffe2 counts background first in every class-dependent layer.
  RawTensor cls = Rows({3, 2});
  CHECK_FALSE(RelayoutCaffe2ClassLayers("cls_score.weight", cls).empty());
  CHECK(RowValues(cls) == std::vector<double>{2, 3, 1});
  RawTensor box = Rows({12, 2});
  RelayoutCaffe2ClassLayers("bbox_pred.bias", box);
  CHECK(box.shape == std::vector<int64_t>{8, 2});
  CHECK(RowValues(box).front() == 5);
  RawTensor mask = Rows({3, 4, 1, 1});
  RelayoutCaffe2ClassLayers("mask_head.predictor.weight", mask);
  CHECK(RowValues(mask) == std::vector<double>{2, 3});
  RawTensor other = Rows({3});
  CHECK(RelayoutCaffe2ClassLayers("box_head.fc1.bias", other).empty());
}

TEST_CASE("names without the model's prefix get one, as Detectron2's heuristics match them",
          "[mapping]") {
  CHECK(WithModelPrefix("stem.conv1.weight", true) == "backbone.bottom_up.stem.conv1.weight");
  CHECK(WithModelPrefix("res4.0.conv1.weight", false) == "backbone.bottom_up.res4.0.conv1.weight");
  CHECK(WithModelPrefix("res5.0.conv1.weight", true) == "backbone.bottom_up.res5.0.conv1.weight");
  CHECK(WithModelPrefix("res5.0.conv1.weight", false) == "roi_heads.res5.0.conv1.weight");
  CHECK(WithModelPrefix("fpn_lateral3.bias", true) == "backbone.fpn_lateral3.bias");
  CHECK(WithModelPrefix("box_head.fc1.weight", true) == "roi_heads.box_head.fc1.weight");
  CHECK(WithModelPrefix("cls_score.weight", true) == "roi_heads.box_predictor.cls_score.weight");
  CHECK(WithModelPrefix("mask_head.deconv.bias", true) == "roi_heads.mask_head.deconv.bias");
  CHECK(WithModelPrefix("roi_heads.res5.0.conv1.weight", true) == "roi_heads.res5.0.conv1.weight");
  CHECK(WithModelPrefix("fc1000.weight", true) == "fc1000.weight");
}

TEST_CASE("class-dependent layers are re-laid out to background first", "[relayout]") {
  RawTensor cls = Rows({4, 3});  // 3 classes, background last
  RelayoutClassLayer(ClassLayout::kClassifier, cls, std::nullopt);
  CHECK(RowValues(cls) == std::vector<double>{4, 1, 2, 3});

  RawTensor box = Rows({8});  // 2 classes x 4 deltas, no background
  RelayoutClassLayer(ClassLayout::kBoxDeltas, box, 12);
  CHECK(RowValues(box) == std::vector<double>{0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8});
  RawTensor agnostic = Rows({4, 2});  // class-agnostic: repeated for background + 2 classes
  RelayoutClassLayer(ClassLayout::kBoxDeltas, agnostic, 12);
  CHECK(agnostic.shape == std::vector<int64_t>{12, 2});
  CHECK(RowValues(agnostic) == std::vector<double>{1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4});
  RawTensor one_class = Rows({4});  // one class: its deltas behind background's zeros
  RelayoutClassLayer(ClassLayout::kBoxDeltas, one_class, 8);
  CHECK(RowValues(one_class) == std::vector<double>{0, 0, 0, 0, 1, 2, 3, 4});

  RawTensor masks = Rows({2, 3, 1, 1});
  RelayoutClassLayer(ClassLayout::kMaskLogits, masks, 3);
  CHECK(masks.shape == std::vector<int64_t>{3, 3, 1, 1});
  CHECK(RowValues(masks) == std::vector<double>{0, 1, 2});
  RawTensor agnostic_mask = Rows({1});
  RelayoutClassLayer(ClassLayout::kMaskLogits, agnostic_mask, 5);
  CHECK(RowValues(agnostic_mask) == std::vector<double>{1, 1, 1, 1, 1});

  RawTensor scalar = Rows({});
  CHECK_THROWS_AS(RelayoutClassLayer(ClassLayout::kClassifier, scalar, std::nullopt),
                  std::invalid_argument);
}

TEST_CASE("Cascade R-CNN's stages: stage 0 as the standard head, the others under cascade",
          "[mapping][cascade]") {
  CHECK(Ours("roi_heads.box_head.0.fc1.weight") == "roi_heads.box_head.fc6.weight");
  CHECK(Ours("roi_heads.box_head.0.fc2.bias") == "roi_heads.box_head.fc7.bias");
  CHECK(Ours("roi_heads.box_head.2.fc1.weight") == "roi_heads.cascade.2.box_head.fc6.weight");
  CHECK(Ours("roi_heads.box_predictor.0.cls_score.weight") ==
        "roi_heads.box_predictor.cls_score.weight");
  CHECK(Ours("roi_heads.box_predictor.1.bbox_pred.bias") ==
        "roi_heads.cascade.1.box_predictor.bbox_pred.bias");
  CHECK(MapDetectron2Name("roi_heads.box_predictor.2.cls_score.weight")->layout ==
        ClassLayout::kClassifier);
  CHECK(MapDetectron2Name("roi_heads.box_predictor.2.bbox_pred.weight")->layout ==
        ClassLayout::kBoxDeltas);
  // The standard head's names are unchanged.
  CHECK(Ours("roi_heads.box_head.fc1.weight") == "roi_heads.box_head.fc6.weight");
  // A class-agnostic model keeps the 4 rows as they are.
  RawTensor agnostic = Rows({4, 2});
  RelayoutClassLayer(ClassLayout::kBoxDeltas, agnostic, 4);
  CHECK(agnostic.shape == std::vector<int64_t>{4, 2});
  CHECK(RowValues(agnostic) == std::vector<double>{1, 2, 3, 4});
}

TEST_CASE("row operations move weights and biases alike", "[relayout]") {
  RawTensor t = Rows({4, 2});
  MoveRow(t, 0, 3);
  CHECK(RowValues(t) == std::vector<double>{2, 3, 4, 1});
  MoveRow(t, 3, 1);
  CHECK(RowValues(t) == std::vector<double>{2, 1, 3, 4});
  DropLeadingRows(t, 3);
  CHECK(RowValues(t) == std::vector<double>{4});
  PrependZeroRows(t, 2);
  CHECK(t.shape == std::vector<int64_t>{3, 2});
  CHECK(t.bytes.size() == 24);
  CHECK_THROWS_AS(DropLeadingRows(t, 4), std::invalid_argument);
}

TEST_CASE("a Detectron2 checkpoint onto a model: fits, skips, unknowns, misses", "[mapping]") {
  Detectron2Checkpoint checkpoint;
  checkpoint.source = "model_final.pth";
  checkpoint.tensors["backbone.bottom_up.stem.conv1.weight"] = Rows({4, 3, 7, 7});
  checkpoint.tensors["roi_heads.box_predictor.cls_score.weight"] = Rows({81, 8});  // 80 classes
  checkpoint.tensors["roi_heads.box_predictor.cls_score.bias"] = Rows({81});
  checkpoint.tensors["roi_heads.box_predictor.bbox_pred.weight"] = Rows({320, 8});
  checkpoint.tensors["roi_heads.mask_head.predictor.weight"] = Rows({80, 2, 1, 1});
  checkpoint.tensors["roi_heads.mask_head.predictor.bias"] = Rows({80});
  checkpoint.tensors["sem_seg_head.predictor.weight"] = Rows({54});
  checkpoint.tensors["proposal_generator.anchor_generator.cell_anchors.0"] = Rows({3, 4});
  checkpoint.tensors["backbone.fpn_output2.weight"] = Rows({8, 8, 3, 3});

  SECTION("the same classes: everything fits, re-laid out") {
    const ModelShapes model = {{"backbone.body.conv1.weight", {4, 3, 7, 7}},
                               {"roi_heads.box_predictor.cls_score.weight", {81, 8}},
                               {"roi_heads.box_predictor.cls_score.bias", {81}},
                               {"roi_heads.box_predictor.bbox_pred.weight", {324, 8}},
                               {"roi_heads.mask_predictor.mask_fcn_logits.weight", {81, 2, 1, 1}},
                               {"roi_heads.mask_predictor.mask_fcn_logits.bias", {81}},
                               {"backbone.fpn.layer_blocks.0.0.weight", {8, 8, 3, 3}},
                               {"backbone.fpn.layer_blocks.0.0.bias", {8}}};
    const WeightMapping mapping = MapCheckpointToModel(checkpoint, &model);
    CHECK(mapping.tensors.size() == 7);
    CHECK(mapping.shape_mismatches.empty());
    CHECK(RowValues(mapping.tensors.at("roi_heads.box_predictor.cls_score.bias").tensor).front() ==
          81);
    CHECK(mapping.tensors.at("roi_heads.box_predictor.bbox_pred.weight").checkpoint_key ==
          "roi_heads.box_predictor.bbox_pred.weight");
    CHECK(mapping.missing == std::vector<std::string>{"backbone.fpn.layer_blocks.0.0.bias"});
    REQUIRE(mapping.unknown.size() == 1);
    CHECK_THAT(mapping.unknown[0],
               Catch::StartsWith("sem_seg_head.predictor.weight"));
    REQUIRE(mapping.ignored.size() == 1);
    CHECK_THAT(mapping.ignored[0], Catch::Contains("anchors come from the config"));
  }
  SECTION("other classes: the class-dependent layers are skipped, the rest loads") {
    const ModelShapes model = {{"backbone.body.conv1.weight", {4, 3, 7, 7}},
                               {"roi_heads.box_predictor.cls_score.weight", {5, 8}},
                               {"roi_heads.box_predictor.cls_score.bias", {5}},
                               {"roi_heads.box_predictor.bbox_pred.weight", {20, 8}},
                               {"roi_heads.mask_predictor.mask_fcn_logits.weight", {5, 2, 1, 1}},
                               {"roi_heads.mask_predictor.mask_fcn_logits.bias", {5}},
                               {"backbone.fpn.layer_blocks.0.0.weight", {8, 8, 3, 3}}};
    const WeightMapping mapping = MapCheckpointToModel(checkpoint, &model);
    CHECK(mapping.tensors.size() == 2);
    REQUIRE(mapping.shape_mismatches.size() == 5);
    const ShapeMismatch* bbox = nullptr;
    for (const auto& skip : mapping.shape_mismatches) {
      if (skip.model_key == "roi_heads.box_predictor.bbox_pred.weight")
        bbox = &skip;
    }
    REQUIRE(bbox != nullptr);
    CHECK(bbox->file_shape == std::vector<int64_t>{324, 8});  // re-laid out before the check
    CHECK(bbox->model_shape == std::vector<int64_t>{20, 8});
    CHECK(mapping.missing.size() == 5);
  }
  SECTION("without a model: every mapped tensor, re-laid out") {
    const WeightMapping mapping = MapCheckpointToModel(checkpoint, nullptr);
    CHECK(mapping.tensors.size() == 7);
    CHECK(mapping.tensors.at("roi_heads.mask_predictor.mask_fcn_logits.weight").tensor.shape[0] ==
          81);
    CHECK(mapping.missing.empty());
  }
  SECTION("two keys for one name: the file is ambiguous") {
    checkpoint.tensors["backbone.stem.conv1.weight"] = Rows({4, 3, 7, 7});
    CHECK_THROWS_WITH(
        MapCheckpointToModel(checkpoint, nullptr),
        Catch::Contains("model_final.pth: keys 'backbone.bottom_up.stem.conv1.weight' and "
                        "'backbone.stem.conv1.weight' both map to 'backbone.body.conv1.weight'"));
  }
}

TEST_CASE("a Caffe2 ImageNet backbone onto FPN and C4 models", "[mapping]") {
  Detectron2Checkpoint checkpoint;
  checkpoint.source = "R-50.pkl";
  checkpoint.origin = CheckpointOrigin::kCaffe2;
  checkpoint.matching_heuristics = true;
  checkpoint.tensors["conv1_w"] = Rows({4, 3, 7, 7});
  checkpoint.tensors["res_conv1_bn_s"] = Rows({4});
  checkpoint.tensors["res_conv1_bn_b"] = Rows({4});
  checkpoint.tensors["res5_0_branch2a_w"] = Rows({2, 4, 1, 1});
  checkpoint.tensors["res5_0_branch2a_bn_s"] = Rows({2});
  checkpoint.tensors["fc1000_w"] = Rows({1000, 8});

  const ModelShapes fpn = {{"backbone.body.conv1.weight", {4, 3, 7, 7}},
                           {"backbone.body.bn1.weight", {4}},
                           {"backbone.body.bn1.bias", {4}},
                           {"backbone.body.bn1.running_mean", {4}},
                           {"backbone.body.bn1.running_var", {4}},
                           {"backbone.body.layer4.0.conv1.weight", {2, 4, 1, 1}},
                           {"backbone.body.layer4.0.bn1.weight", {2}},
                           {"backbone.body.layer4.0.bn1.bias", {2}},
                           {"backbone.body.layer4.0.bn1.running_mean", {2}},
                           {"backbone.body.layer4.0.bn1.running_var", {2}}};
  const WeightMapping mapping = MapCheckpointToModel(checkpoint, &fpn);
  CHECK(mapping.tensors.size() == 9);
  CHECK(mapping.missing == std::vector<std::string>{"backbone.body.layer4.0.bn1.bias"});
  CHECK(mapping.tensors.at("backbone.body.bn1.running_mean").tensor.Sum() == 0.0);
  CHECK(mapping.tensors.at("backbone.body.bn1.running_var").tensor.Sum() == 4.0);
  CHECK(mapping.tensors.at("backbone.body.conv1.weight").checkpoint_key == "conv1_w");
  REQUIRE(mapping.ignored.size() == 1);
  CHECK_THAT(mapping.ignored[0], Catch::StartsWith("fc1000_w (the ImageNet classifier"));
  bool noted = false;
  for (const auto& note : mapping.notes)
    noted = noted || note.starts_with("4 running_mean/running_var buffers");
  CHECK(noted);

  const ModelShapes c4 = {{"backbone.body.conv1.weight", {4, 3, 7, 7}},
                          {"roi_heads.box_head.layer4.0.conv1.weight", {2, 4, 1, 1}}};
  const WeightMapping head = MapCheckpointToModel(checkpoint, &c4);
  CHECK(head.tensors.contains("roi_heads.box_head.layer4.0.conv1.weight"));
  CHECK(head.tensors.size() == 2);
}

TEST_CASE("keys are grouped for the log", "[mapping]") {
  const std::vector<std::string> keys = {"roi_heads.keypoint_head.a.weight",
                                         "roi_heads.keypoint_head.b.weight", "pixel_mean",
                                         "backbone.body.layer1.0.conv1.weight"};
  CHECK(GroupKeys(keys) == std::vector<std::string>{"roi_heads.keypoint_head.* (2 keys)",
                                                    "pixel_mean",
                                                    "backbone.body.layer1.0.conv1.weight"});
  CHECK(GroupKeys(keys, 2) ==
        std::vector<std::string>{"roi_heads.keypoint_head.* (2 keys)", "... and 2 more"});
}
