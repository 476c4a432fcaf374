#include "trainer/model/weights/caffe2_names.h"

#include <algorithm>
#include <cctype>
#include <vector>

#include "trainer/model/weights/tensor_rows.h"

namespace mrcnn::model::weights {
namespace {

enum class Where { kPrefix, kSuffix, kAnywhere };

struct Rewrite {
  Where where;
  std::string_view from;
  std::string_view to;
};

// Applied in order, each once, to the name with every '_' turned into '.'. Later rules see
// what earlier ones wrote, so the order is part of the table.
constexpr Rewrite kRewrites[] = {
    // Parameters: Caffe2's _w/_b; its norms' scale/shift and statistics.
    {Where::kSuffix, ".w", ".weight"},
    {Where::kSuffix, ".b", ".bias"},
    {Where::kSuffix, "bn.s", "norm.weight"},
    {Where::kSuffix, "bn.bias", "norm.bias"},
    {Where::kSuffix, "bn.rm", "norm.running_mean"},
    {Where::kSuffix, "bn.running.mean", "norm.running_mean"},
    {Where::kSuffix, "bn.riv", "norm.running_var"},
    {Where::kSuffix, "bn.running.var", "norm.running_var"},
    {Where::kSuffix, "bn.gamma", "norm.weight"},
    {Where::kSuffix, "bn.beta", "norm.bias"},
    {Where::kSuffix, "gn.s", "norm.weight"},
    {Where::kSuffix, "gn.bias", "norm.bias"},
    // The stem: its norm is "res_conv1_bn", its conv "conv1".
    {Where::kPrefix, "res.conv1.norm.", "conv1.norm."},
    {Where::kPrefix, "conv1.", "stem.conv1."},
    // Bottleneck blocks: branch1 is the projection shortcut, branch2a-c the three convs.
    {Where::kAnywhere, ".branch1.", ".shortcut."},
    {Where::kAnywhere, ".branch2a.", ".conv1."},
    {Where::kAnywhere, ".branch2b.", ".conv2."},
    {Where::kAnywhere, ".branch2c.", ".conv3."},
    // The RPN head (with FPN its layers are named after level 2 and shared by all levels).
    {Where::kAnywhere, "conv.rpn.fpn2", "proposal_generator.rpn_head.conv"},
    {Where::kAnywhere, "conv.rpn", "proposal_generator.rpn_head.conv"},
    {Where::kAnywhere, "rpn.bbox.pred.fpn2", "proposal_generator.rpn_head.anchor_deltas"},
    {Where::kAnywhere, "rpn.cls.logits.fpn2", "proposal_generator.rpn_head.objectness_logits"},
    {Where::kAnywhere, "rpn.bbox.pred", "proposal_generator.rpn_head.anchor_deltas"},
    {Where::kAnywhere, "rpn.cls.logits", "proposal_generator.rpn_head.objectness_logits"},
    // The box head and predictor.
    {Where::kPrefix, "bbox.pred", "bbox_pred"},
    {Where::kPrefix, "cls.score", "cls_score"},
    {Where::kPrefix, "fc6.", "box_head.fc1."},
    {Where::kPrefix, "fc7.", "box_head.fc2."},
    {Where::kPrefix, "head.conv", "box_head.conv"},
};

// After the FPN's names (RenameFpn) are settled.
constexpr Rewrite kMaskHeadRewrites[] = {
    // The mask head: "_[mask]_fcn1" (FPN), "mask_fcn_logits", "conv5_mask" (C4's deconv).
    {Where::kAnywhere, ".[mask].fcn", "mask_head.mask_fcn"},
    {Where::kPrefix, ".mask.fcn", "mask_head.mask_fcn"},
    {Where::kAnywhere, "mask.fcn.logits", "mask_head.predictor"},
    {Where::kAnywhere, "conv5.mask", "mask_head.deconv"},
};

void Apply(const Rewrite& rule, std::string& name) {
  switch (rule.where) {
    case Where::kPrefix:
      if (name.starts_with(rule.from))
        name.replace(0, rule.from.size(), rule.to);
      return;
    case Where::kSuffix:
      if (name.ends_with(rule.from))
        name.replace(name.size() - rule.from.size(), rule.from.size(), rule.to);
      return;
    case Where::kAnywhere:
      for (size_t at = name.find(rule.from); at != std::string::npos;
           at = name.find(rule.from, at + rule.to.size())) {
        name.replace(at, rule.from.size(), rule.to);
      }
      return;
  }
}

// "fpn.inner.res5.2.sum.lateral[.norm].weight" -> "fpn_lateral5[.norm].weight" and
// "fpn.res5.2.sum[.norm].weight" -> "fpn_output5[.norm].weight": FPN's layers are named
// after the last block of the stage they read.
std::string RenameFpn(const std::string& name) {
  std::vector<std::string_view> parts;
  for (size_t begin = 0;;) {
    const size_t dot = name.find('.', begin);
    parts.emplace_back(
        std::string_view(name).substr(begin, dot == std::string::npos ? dot : dot - begin));
    if (dot == std::string::npos)
      break;
    begin = dot + 1;
  }
  const bool lateral = name.starts_with("fpn.inner.res");
  if (!lateral && !name.starts_with("fpn.res"))
    return name;
  const std::string_view stage = parts[lateral ? 2 : 1].substr(3);
  if (stage.empty() || !std::all_of(stage.begin(), stage.end(), [](char c) {
        return std::isdigit(static_cast<unsigned char>(c));
      }))
    return name;
  const bool norm = std::find(parts.begin(), parts.end(), "norm") != parts.end();
  return std::string(lateral ? "fpn_lateral" : "fpn_output") + std::string(stage) +
         (norm ? ".norm." : ".") + std::string(parts.back());
}

}  // namespace

std::string Caffe2NameToDetectron2(std::string_view caffe2_name) {
  std::string name(caffe2_name);
  // Two blobs whose names the rules below would otherwise get wrong.
  if (name == "pred_w")
    name = "linear_w";
  else if (name == "pred_b")
    name = "linear_b";
  std::replace(name.begin(), name.end(), '_', '.');
  for (const Rewrite& rule : kRewrites)
    Apply(rule, name);
  name = RenameFpn(name);
  for (const Rewrite& rule : kMaskHeadRewrites)
    Apply(rule, name);
  return name;
}

std::string RelayoutCaffe2ClassLayers(const std::string& detectron2_name, RawTensor& tensor) {
  if (tensor.shape.empty())
    return "";
  if (detectron2_name.starts_with("bbox_pred.") && tensor.shape[0] >= 4) {
    DropLeadingRows(tensor, 4);
    return detectron2_name + ": dropped Caffe2's 4 background box-regression rows";
  }
  if (detectron2_name.starts_with("mask_head.predictor.") && tensor.shape[0] >= 1) {
    DropLeadingRows(tensor, 1);
    return detectron2_name + ": dropped Caffe2's background mask channel";
  }
  if (detectron2_name.starts_with("cls_score.") && tensor.shape[0] >= 1) {
    MoveRow(tensor, 0, tensor.shape[0] - 1);
    return detectron2_name + ": moved Caffe2's background class from first to last";
  }
  return "";
}

}  // namespace mrcnn::model::weights
