#include "trainer/model/weights/weight_name_mapping.h"

#include <cctype>
#include <charconv>
#include <cstring>
#include <set>
#include <stdexcept>
#include <utility>

#include "trainer/model/weights/caffe2_names.h"
#include "trainer/model/weights/tensor_rows.h"

namespace mrcnn::model::weights {
namespace {

// Names are matched against patterns: literal text with placeholders. "{s}" (any single
// letter) captures a decimal number; "{p}" captures the rest of the name if it is a word
// (a norm's weight, bias, running_mean, running_var). Replacements write "{s}" back, or
// "{s-1}"/"{i+5}" with the arithmetic done (a negative result means no match).
using Captures = std::map<char, std::string>;

// What follows a module's prefix: the stem's conv and norm, a ResNet block's, or a plain
// layer's weight and bias.
enum class Part { kStem, kBlock, kLayer };

struct PrefixRule {
  std::string_view detectron2;
  std::string_view ours;
  Part part;
  ClassLayout layout = ClassLayout::kNone;
};

// The one table of where Detectron2's modules live in our model.
constexpr PrefixRule kModules[] = {
    {"backbone.bottom_up.stem.", "backbone.body.", Part::kStem},
    {"backbone.stem.", "backbone.body.", Part::kStem},  // C4/DC5: no FPN, no bottom_up
    {"backbone.bottom_up.res{s}.{b}.", "backbone.body.layer{s-1}.{b}.", Part::kBlock},
    {"backbone.res{s}.{b}.", "backbone.body.layer{s-1}.{b}.", Part::kBlock},
    {"roi_heads.res5.{b}.", "roi_heads.box_head.layer4.{b}.", Part::kBlock},
    {"backbone.fpn_lateral{l}.", "backbone.fpn.inner_blocks.{l-2}.0.", Part::kLayer},
    {"backbone.fpn_output{l}.", "backbone.fpn.layer_blocks.{l-2}.0.", Part::kLayer},
    // RetinaNet: LastLevelP6P7 and the dense head (its names are Detectron2's own).
    {"backbone.top_block.p{l}.", "backbone.fpn.extra_blocks.p{l}.", Part::kLayer},
    {"head.cls_subnet.{i}.", "head.cls_subnet.{i}.", Part::kLayer},
    {"head.bbox_subnet.{i}.", "head.bbox_subnet.{i}.", Part::kLayer},
    {"head.cls_score.", "head.cls_score.", Part::kLayer},
    {"head.bbox_pred.", "head.bbox_pred.", Part::kLayer},
    {"proposal_generator.rpn_head.conv.", "rpn.head.conv.0.0.", Part::kLayer},
    {"proposal_generator.rpn_head.objectness_logits.", "rpn.head.cls_logits.", Part::kLayer},
    {"proposal_generator.rpn_head.anchor_deltas.", "rpn.head.bbox_pred.", Part::kLayer},
    {"roi_heads.box_head.fc{i}.", "roi_heads.box_head.fc{i+5}.", Part::kLayer},
    {"roi_heads.box_head.conv{i}.", "roi_heads.box_head.conv{i}.", Part::kLayer},
    {"roi_heads.box_predictor.cls_score.", "roi_heads.box_predictor.cls_score.", Part::kLayer,
     ClassLayout::kClassifier},
    {"roi_heads.box_predictor.bbox_pred.", "roi_heads.box_predictor.bbox_pred.", Part::kLayer,
     ClassLayout::kBoxDeltas},
    // Cascade R-CNN's stages (box_head.{k}, box_predictor.{k}): stage 0 where the standard
    // head's parts are, stage k > 0 under roi_heads.cascade.{k}.
    {"roi_heads.box_head.0.fc{i}.", "roi_heads.box_head.fc{i+5}.", Part::kLayer},
    {"roi_heads.box_head.0.conv{i}.", "roi_heads.box_head.conv{i}.", Part::kLayer},
    {"roi_heads.box_head.{k}.fc{i}.", "roi_heads.cascade.{k}.box_head.fc{i+5}.", Part::kLayer},
    {"roi_heads.box_head.{k}.conv{i}.", "roi_heads.cascade.{k}.box_head.conv{i}.", Part::kLayer},
    {"roi_heads.box_predictor.0.cls_score.", "roi_heads.box_predictor.cls_score.", Part::kLayer,
     ClassLayout::kClassifier},
    {"roi_heads.box_predictor.0.bbox_pred.", "roi_heads.box_predictor.bbox_pred.", Part::kLayer,
     ClassLayout::kBoxDeltas},
    {"roi_heads.box_predictor.{k}.cls_score.", "roi_heads.cascade.{k}.box_predictor.cls_score.",
     Part::kLayer, ClassLayout::kClassifier},
    {"roi_heads.box_predictor.{k}.bbox_pred.", "roi_heads.cascade.{k}.box_predictor.bbox_pred.",
     Part::kLayer, ClassLayout::kBoxDeltas},
    {"roi_heads.mask_head.mask_fcn{i}.", "roi_heads.mask_head.{i-1}.0.", Part::kLayer},
    {"roi_heads.mask_head.deconv.", "roi_heads.mask_predictor.conv5_mask.", Part::kLayer},
    {"roi_heads.mask_head.predictor.", "roi_heads.mask_predictor.mask_fcn_logits.", Part::kLayer,
     ClassLayout::kMaskLogits},
    // torchvision's KeypointRCNNHeads: conv i at child 2(i-1), its ReLU between.
    {"roi_heads.keypoint_head.conv_fcn{i}.", "roi_heads.keypoint_head.{i*2-2}.", Part::kLayer},
    {"roi_heads.keypoint_head.score_lowres.", "roi_heads.keypoint_predictor.kps_score_lowres.",
     Part::kLayer},
};

struct TailRule {
  Part part;
  std::string_view detectron2;
  std::string_view ours;
};

// Inside a module: Detectron2 keeps a conv's norm under the conv, torchvision beside it.
constexpr TailRule kTails[] = {
    {Part::kStem, "conv1.weight", "conv1.weight"},
    {Part::kStem, "conv1.norm.{p}", "bn1.{p}"},
    {Part::kBlock, "conv{k}.weight", "conv{k}.weight"},
    // A deformable block's offset conv (MODEL.RESNETS.DEFORM_ON_PER_STAGE): a weight and a bias.
    {Part::kBlock, "conv2_offset.{p}", "conv2_offset.{p}"},
    {Part::kBlock, "conv{k}.norm.{p}", "bn{k}.{p}"},
    {Part::kBlock, "shortcut.weight", "downsample.0.weight"},
    {Part::kBlock, "shortcut.norm.{p}", "downsample.1.{p}"},
    {Part::kLayer, "weight", "weight"},
    {Part::kLayer, "bias", "bias"},
    // A layer's norm (MODEL.FPN.NORM, ROI_BOX_HEAD.NORM, ROI_MASK_HEAD.NORM) is inside our conv
    // too (parts.h MakeNormedConv).
    {Part::kLayer, "norm.{p}", "norm.{p}"},
};

struct IgnoreRule {
  enum { kPrefix, kSuffix, kExact } where;
  std::string_view name;
  std::string_view because;
};

constexpr IgnoreRule kIgnored[] = {
    {IgnoreRule::kPrefix, "proposal_generator.anchor_generator.", "anchors come from the config"},
    {IgnoreRule::kExact, "pixel_mean", "MODEL.PIXEL_MEAN sets it"},
    {IgnoreRule::kExact, "pixel_std", "MODEL.PIXEL_STD sets it"},
    {IgnoreRule::kSuffix, ".num_batches_tracked", "BatchNorm's step counter"},
    {IgnoreRule::kPrefix, "fc1000.", "the ImageNet classifier"},
};

bool IsDigit(char c) {
  return std::isdigit(static_cast<unsigned char>(c)) != 0;
}
bool IsWordChar(char c) {
  return std::islower(static_cast<unsigned char>(c)) != 0 || c == '_';
}

// Matches `pattern` against the start of `text` (the whole of it when `whole`); returns the
// length matched, or nullopt.
std::optional<size_t> Match(std::string_view pattern, std::string_view text, bool whole,
                            Captures& captures) {
  size_t p = 0;
  size_t t = 0;
  while (p < pattern.size()) {
    if (pattern[p] != '{') {
      if (t >= text.size() || text[t] != pattern[p])
        return std::nullopt;
      ++p;
      ++t;
      continue;
    }
    const char slot = pattern[p + 1];  // "{x}"
    p += 3;
    const size_t begin = t;
    if (slot == 'p') {
      while (t < text.size() && IsWordChar(text[t]))
        ++t;
    } else {
      while (t < text.size() && IsDigit(text[t]))
        ++t;
    }
    if (t == begin)
      return std::nullopt;
    captures[slot] = std::string(text.substr(begin, t - begin));
  }
  if (whole && t != text.size())
    return std::nullopt;
  return t;
}

// Writes `pattern` with the captures filled in; nullopt when arithmetic goes negative.
std::optional<std::string> Fill(std::string_view pattern, const Captures& captures) {
  std::string out;
  for (size_t p = 0; p < pattern.size();) {
    if (pattern[p] != '{') {
      out.push_back(pattern[p++]);
      continue;
    }
    const size_t close = pattern.find('}', p);
    // "s", "s-1", "i+5", "i*2-2" (a factor, then an offset)
    std::string_view slot = pattern.substr(p + 1, close - p - 1);
    const std::string& value = captures.at(slot[0]);
    if (slot.size() == 1) {
      out += value;
    } else {
      // A number too long for int64 (a hostile name) matches no rule.
      int64_t base = 0;
      int64_t factor = 1;
      int64_t step = 0;
      slot.remove_prefix(1);
      if (slot.front() == '*') {
        const auto [end, error] =
            std::from_chars(slot.data() + 1, slot.data() + slot.size(), factor);
        if (error != std::errc())
          return std::nullopt;
        slot.remove_prefix(static_cast<size_t>(end - slot.data()));
      }
      const std::string_view digits = slot.empty() ? std::string_view("0") : slot.substr(1);
      if (std::from_chars(value.data(), value.data() + value.size(), base).ec != std::errc() ||
          std::from_chars(digits.data(), digits.data() + digits.size(), step).ec != std::errc()) {
        return std::nullopt;
      }
      constexpr int64_t kLargestIndex = 1 << 20;  // stages, blocks, levels: small numbers
      if (base > kLargestIndex || step > kLargestIndex)
        return std::nullopt;
      base *= factor;
      const int64_t result = !slot.empty() && slot.front() == '-' ? base - step : base + step;
      if (result < 0)
        return std::nullopt;
      out += std::to_string(result);
    }
    p = close + 1;
  }
  return out;
}

std::optional<int64_t> RowsOf(const ModelShapes* model, const std::string& name) {
  if (model == nullptr)
    return std::nullopt;
  const auto it = model->find(name);
  if (it == model->end() || it->second.empty())
    return std::nullopt;
  return it->second[0];
}

}  // namespace

std::optional<NameMapping> MapDetectron2Name(std::string_view name) {
  for (const IgnoreRule& rule : kIgnored) {
    const bool hit = rule.where == IgnoreRule::kPrefix   ? name.starts_with(rule.name)
                     : rule.where == IgnoreRule::kSuffix ? name.ends_with(rule.name)
                                                         : name == rule.name;
    if (hit)
      return NameMapping{"", ClassLayout::kNone, std::string(rule.because)};
  }
  for (const PrefixRule& module : kModules) {
    Captures captures;
    const auto matched = Match(module.detectron2, name, false, captures);
    if (!matched)
      continue;
    const std::string_view tail = name.substr(*matched);
    for (const TailRule& rule : kTails) {
      if (rule.part != module.part || !Match(rule.detectron2, tail, true, captures))
        continue;
      const auto prefix = Fill(module.ours, captures);
      const auto rest = Fill(rule.ours, captures);
      if (!prefix || !rest)
        return std::nullopt;
      return NameMapping{*prefix + *rest, module.layout, ""};
    }
    return std::nullopt;  // a module we know, a parameter we do not
  }
  return std::nullopt;
}

std::string WithModelPrefix(const std::string& name, bool backbone_has_res5) {
  for (const std::string_view full : {"backbone.", "proposal_generator.", "roi_heads.", "head."}) {
    if (name.starts_with(full))
      return name;
  }
  Captures captures;
  if (name.starts_with("stem.") || Match("res{s}.", name, false, captures)) {
    if (name.starts_with("res5.") && !backbone_has_res5)
      return "roi_heads." + name;  // C4: res5 is the box head's
    return "backbone.bottom_up." + name;
  }
  if (name.starts_with("fpn_lateral") || name.starts_with("fpn_output"))
    return "backbone." + name;
  if (name.starts_with("box_head.") || name.starts_with("mask_head."))
    return "roi_heads." + name;
  if (name.starts_with("cls_score.") || name.starts_with("bbox_pred."))
    return "roi_heads.box_predictor." + name;
  if (name.starts_with("rpn_head.") || name.starts_with("anchor_generator."))
    return "proposal_generator." + name;
  return name;
}

void RelayoutClassLayer(ClassLayout layout, RawTensor& tensor, std::optional<int64_t> model_rows) {
  const int64_t rows = tensor.shape.empty() ? 0 : tensor.shape[0];
  switch (layout) {
    case ClassLayout::kNone:
      return;
    case ClassLayout::kClassifier:
      MoveRow(tensor, rows - 1, 0);
      return;
    case ClassLayout::kBoxDeltas:
      // A class-agnostic model (MODEL.ROI_BOX_HEAD.CLS_AGNOSTIC_BBOX_REG) takes the 4 rows as
      // they are.
      if (rows == 4 && model_rows && *model_rows == 4)
        return;
      // 4 rows are one class's deltas or class-agnostic ones: the model's size tells which
      // way to grow them (with one class both give the same boxes: background is unused).
      if (rows == 4 && model_rows && *model_rows > 8 && *model_rows % 4 == 0) {
        RepeatRows(tensor, *model_rows / 4);
      } else {
        PrependZeroRows(tensor, 4);
      }
      return;
    case ClassLayout::kMaskLogits:
      // A class-agnostic mask model (MODEL.ROI_MASK_HEAD.CLS_AGNOSTIC_MASK) takes its one
      // channel as it is.
      if (rows == 1 && model_rows && *model_rows == 1)
        return;
      if (rows == 1 && model_rows && *model_rows > 2) {
        RepeatRows(tensor, *model_rows);
      } else {
        PrependZeroRows(tensor, 1);
      }
      return;
  }
}

namespace {

// Detectron2's names of the parts every meta-architecture of ours has: a tensor under one that
// no rule maps belongs to a block we build differently, not to a part the model lacks.
bool InsideModelPart(std::string_view name) {
  for (std::string_view part : {"backbone.", "proposal_generator.", "roi_heads.", "head."})
    if (name.starts_with(part))
      return true;
  return false;
}

// A tensor that only a differently built block has: a deformable block's conv2_offset, the norm
// inside a conv (FPN, heads), a box head's convs.
bool OfAnotherArchitecture(const std::string& ours) {
  return ours.find(".conv2_offset.") != std::string::npos || ours.find(".norm.") != std::string::npos ||
         ours.find("box_head.conv") != std::string::npos;
}

// Whether the model has a tensor whose name starts with `prefix` (a module's "a.b.").
bool HasTensorUnder(const ModelShapes& model, const std::string& prefix) {
  const auto it = model.lower_bound(prefix);
  return it != model.end() && it->first.starts_with(prefix);
}

// Whether the module two levels above `ours` (the block, the conv, the head) has tensors in the
// model: then `ours` belongs to a part the model builds otherwise (refused), while a tensor of a
// whole module the model lacks (a mask head, a 23rd res4 block) is only unknown.
bool ParentModuleInModel(const ModelShapes& model, const std::string& ours) {
  size_t cut = ours.rfind('.');
  if (cut == std::string::npos || cut == 0)
    return false;
  cut = ours.rfind('.', cut - 1);
  if (cut == std::string::npos)
    return false;
  return HasTensorUnder(model, ours.substr(0, cut + 1));
}

// What was done to the class-dependent layers, once per kind of layer.
void AddRelayoutNotes(const std::set<ClassLayout>& relaid, std::vector<std::string>& notes) {
  if (relaid.contains(ClassLayout::kClassifier))
    notes.push_back("cls_score: background class moved from Detectron2's last row to our first");
  if (relaid.contains(ClassLayout::kBoxDeltas))
    notes.push_back(
        "bbox_pred: background rows added in front (zeros), class-agnostic rows repeated per "
        "class, or kept as they are for a class-agnostic model");
  if (relaid.contains(ClassLayout::kMaskLogits))
    notes.push_back(
        "mask predictor: background channel added in front (zeros), a class-agnostic channel "
        "repeated per class, or kept as it is for a class-agnostic model");
}

}  // namespace

WeightMapping MapCheckpointToModel(Detectron2Checkpoint checkpoint, const ModelShapes* model) {
  WeightMapping out;
  const bool backbone_has_res5 = model == nullptr || HasTensorUnder(*model, "backbone.body.layer4.");
  std::map<std::string, std::string> claimed;  // our name -> the file key that gave it
  std::set<ClassLayout> relaid;
  for (auto& [key, tensor] : checkpoint.tensors) {
    std::string name = key;
    if (checkpoint.origin == CheckpointOrigin::kCaffe2) {
      name = Caffe2NameToDetectron2(key);
      if (std::string note = RelayoutCaffe2ClassLayers(name, tensor); !note.empty())
        out.notes.push_back(key + " -> " + note);
    }
    if (checkpoint.matching_heuristics)
      name = WithModelPrefix(name, backbone_has_res5);
    const auto mapping = MapDetectron2Name(name);
    if (!mapping) {
      (InsideModelPart(name) ? out.unplaced : out.unknown)
          .push_back(key == name ? key : key + " (as " + name + ")");
      continue;
    }
    if (!mapping->ignored_because.empty()) {
      out.ignored.push_back(key + " (" + mapping->ignored_because + ")");
      continue;
    }
    const std::string& ours = mapping->name;
    if (const auto [it, fresh] = claimed.emplace(ours, key); !fresh) {
      throw std::runtime_error(checkpoint.source + ": keys '" + it->second + "' and '" + key +
                               "' both map to '" + ours + "'; the checkpoint is ambiguous");
    }
    if (model != nullptr && !model->contains(ours)) {
      if (OfAnotherArchitecture(ours) && ParentModuleInModel(*model, ours))
        out.unplaced.push_back(key + " -> " + ours + " (its module is the model's, this tensor is not)");
      else
        out.unknown.push_back(key + " -> " + ours + " (not in the model)");
      continue;
    }
    try {
      RelayoutClassLayer(mapping->layout, tensor, RowsOf(model, ours));
    } catch (const std::invalid_argument& e) {
      out.unknown.push_back(key + " (cannot be re-laid out: " + e.what() + ")");
      continue;
    }
    if (mapping->layout != ClassLayout::kNone)
      relaid.insert(mapping->layout);
    if (model != nullptr && model->at(ours) != tensor.shape) {
      out.shape_mismatches.push_back({ours, key, tensor.shape, model->at(ours)});
      continue;
    }
    out.tensors[ours] = MappedTensor{key, std::move(tensor)};
  }
  AddRelayoutNotes(relaid, out.notes);
  if (model == nullptr)
    return out;

  // Frozen norms whose statistics the file lacks: identity statistics, as Detectron2 loads
  // old checkpoints (the scale and shift then carry the whole norm).
  size_t synthesised = 0;
  for (const auto& [name, shape] : *model) {
    const bool mean = name.ends_with(".running_mean");
    if ((!mean && !name.ends_with(".running_var")) || out.tensors.contains(name))
      continue;
    const std::string module = name.substr(0, name.rfind('.') + 1);
    const auto weight = out.tensors.find(module + "weight");
    if (weight == out.tensors.end())
      continue;
    RawTensor filled;
    filled.dtype = TensorDType::kFloat32;
    filled.shape = shape;
    const float value = mean ? 0.0f : 1.0f;
    const auto count = static_cast<size_t>(CheckedNumElements(shape));
    filled.bytes.resize(count * sizeof(float));
    for (size_t i = 0; i < count; ++i)
      std::memcpy(filled.bytes.data() + i * sizeof(float), &value, sizeof(float));
    out.tensors[name] =
        MappedTensor{mean ? "(0: not in the file)" : "(1: not in the file)", std::move(filled)};
    ++synthesised;
  }
  if (synthesised > 0) {
    out.notes.push_back(std::to_string(synthesised) +
                        " running_mean/running_var buffers of norms are not in the file: set to 0 "
                        "and 1, as Detectron2's FrozenBatchNorm2d does for such checkpoints");
  }
  for (const auto& [name, shape] : *model) {
    if (!out.tensors.contains(name) && !name.ends_with(".num_batches_tracked"))
      out.missing.push_back(name);
  }
  return out;
}

std::vector<std::string> GroupKeys(const std::vector<std::string>& keys, size_t max_lines) {
  // Group by the first two parts of the name, in the keys' order.
  std::vector<std::pair<std::string, std::vector<std::string>>> groups;
  std::map<std::string, size_t> index;
  for (const std::string& key : keys) {
    const size_t first = key.find('.');
    const size_t second = first == std::string::npos ? first : key.find('.', first + 1);
    const std::string prefix = second == std::string::npos ? key : key.substr(0, second);
    const auto [it, fresh] = index.emplace(prefix, groups.size());
    if (fresh)
      groups.push_back({prefix, {}});
    groups[it->second].second.push_back(key);
  }
  std::vector<std::string> lines;
  for (size_t g = 0; g < groups.size(); ++g) {
    if (lines.size() + 1 == max_lines && g + 1 < groups.size()) {
      size_t rest = 0;
      for (size_t r = g; r < groups.size(); ++r)
        rest += groups[r].second.size();
      lines.push_back("... and " + std::to_string(rest) + " more");
      break;
    }
    const auto& [prefix, members] = groups[g];
    lines.push_back(members.size() == 1
                        ? members[0]
                        : prefix + ".* (" + std::to_string(members.size()) + " keys)");
  }
  return lines;
}

}  // namespace mrcnn::model::weights
