// The public C++ API (kernels/ops.h): thin typed calls into the dispatcher.
#include "kernels/ops.h"

#include <ATen/core/dispatch/Dispatcher.h>

#include <string>
#include <tuple>

namespace mrcnn::kernels {
namespace {

template <typename Signature>
c10::TypedOperatorHandle<Signature> FindOp(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Signature>();
}

}  // namespace

at::Tensor Nms(const at::Tensor& boxes, const at::Tensor& scores, double iou_threshold) {
  static auto op = FindOp<at::Tensor(const at::Tensor&, const at::Tensor&, double)>("mrcnn::nms");
  return op.call(boxes, scores, iou_threshold);
}

at::Tensor BatchedNms(const at::Tensor& boxes, const at::Tensor& scores, const at::Tensor& idxs,
                      double iou_threshold) {
  static auto op =
      FindOp<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, double)>(
          "mrcnn::batched_nms");
  return op.call(boxes, scores, idxs, iou_threshold);
}

at::Tensor BatchedNmsKeepMask(const at::Tensor& boxes, const at::Tensor& scores,
                              const at::Tensor& idxs, double iou_threshold) {
  static auto op =
      FindOp<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, double)>(
          "mrcnn::batched_nms_keep_mask");
  return op.call(boxes, scores, idxs, iou_threshold);
}

at::Tensor NmsKeepMaskGrouped(const at::Tensor& boxes, const at::Tensor& scores,
                              const at::Tensor& usable, c10::IntArrayRef group_sizes,
                              double iou_threshold) {
  static auto op = FindOp<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                     c10::IntArrayRef, double)>("mrcnn::nms_keep_mask_grouped");
  return op.call(boxes, scores, usable, group_sizes, iou_threshold);
}

at::Tensor RoiAlign(const at::Tensor& input, const at::Tensor& rois, double spatial_scale,
                    int64_t pooled_height, int64_t pooled_width, int64_t sampling_ratio,
                    bool aligned) {
  static auto op = FindOp<at::Tensor(const at::Tensor&, const at::Tensor&, double, int64_t, int64_t,
                                     int64_t, bool)>("mrcnn::roi_align");
  return op.call(input, rois, spatial_scale, pooled_height, pooled_width, sampling_ratio, aligned);
}

at::Tensor MultiLevelRoiAlign(const std::vector<at::Tensor>& features, const at::Tensor& rois,
                              const std::vector<double>& scales, int64_t pooled_height,
                              int64_t pooled_width, int64_t sampling_ratio, bool aligned,
                              int64_t canonical_scale, int64_t canonical_level) {
  static auto op =
      FindOp<at::Tensor(at::TensorList, const at::Tensor&, at::ArrayRef<double>, int64_t, int64_t,
                        int64_t, bool, int64_t, int64_t)>("mrcnn::multi_level_roi_align");
  return op.call(features, rois, scales, pooled_height, pooled_width, sampling_ratio, aligned,
                 canonical_scale, canonical_level);
}

at::Tensor BoxIou(const at::Tensor& a, const at::Tensor& b) {
  static auto op = FindOp<at::Tensor(const at::Tensor&, const at::Tensor&)>("mrcnn::box_iou");
  return op.call(a, b);
}

at::Tensor EncodeBoxes(const at::Tensor& reference_boxes, const at::Tensor& proposals,
                       const std::array<double, 4>& weights) {
  static auto op = FindOp<at::Tensor(const at::Tensor&, const at::Tensor&, at::ArrayRef<double>)>(
      "mrcnn::encode_boxes");
  return op.call(reference_boxes, proposals, weights);
}

at::Tensor DecodeBoxes(const at::Tensor& rel_codes, const at::Tensor& boxes,
                       const std::array<double, 4>& weights, double clamp) {
  static auto op =
      FindOp<at::Tensor(const at::Tensor&, const at::Tensor&, at::ArrayRef<double>, double)>(
          "mrcnn::decode_boxes");
  return op.call(rel_codes, boxes, weights, clamp);
}

at::Tensor GenerateAnchors(const std::vector<std::array<int64_t, 2>>& feature_sizes,
                           const std::vector<std::array<int64_t, 2>>& strides,
                           const std::vector<std::vector<double>>& sizes,
                           const std::vector<std::vector<double>>& aspect_ratios,
                           const at::Device& device) {
  TORCH_CHECK(feature_sizes.size() == strides.size() && sizes.size() == feature_sizes.size() &&
                  aspect_ratios.size() == feature_sizes.size(),
              "mrcnn::kernels::GenerateAnchors: feature_sizes, strides, sizes and aspect_ratios "
              "need one entry per level; got ",
              feature_sizes.size(), ", ", strides.size(), ", ", sizes.size(), ", ",
              aspect_ratios.size());
  std::vector<int64_t> flat_sizes, flat_strides, sizes_per_level, ratios_per_level;
  std::vector<double> all_sizes, all_ratios;
  for (size_t l = 0; l < feature_sizes.size(); ++l) {
    flat_sizes.insert(flat_sizes.end(), feature_sizes[l].begin(), feature_sizes[l].end());
    flat_strides.insert(flat_strides.end(), strides[l].begin(), strides[l].end());
    sizes_per_level.push_back(static_cast<int64_t>(sizes[l].size()));
    ratios_per_level.push_back(static_cast<int64_t>(aspect_ratios[l].size()));
    all_sizes.insert(all_sizes.end(), sizes[l].begin(), sizes[l].end());
    all_ratios.insert(all_ratios.end(), aspect_ratios[l].begin(), aspect_ratios[l].end());
  }
  static auto op =
      FindOp<at::Tensor(at::IntArrayRef, at::IntArrayRef, at::ArrayRef<double>, at::IntArrayRef,
                        at::ArrayRef<double>, at::IntArrayRef, at::Device)>(
          "mrcnn::generate_anchors");
  return op.call(flat_sizes, flat_strides, all_sizes, sizes_per_level, all_ratios, ratios_per_level,
                 device);
}

at::Tensor MatchProposals(const at::Tensor& match_quality, double high_threshold,
                          double low_threshold, bool allow_low_quality_matches) {
  static auto op =
      FindOp<at::Tensor(const at::Tensor&, double, double, bool)>("mrcnn::match_proposals");
  return op.call(match_quality, high_threshold, low_threshold, allow_low_quality_matches);
}

std::pair<at::Tensor, at::Tensor> SampleBalanced(const at::Tensor& labels,
                                                 int64_t batch_size_per_image,
                                                 double positive_fraction,
                                                 const std::optional<at::Generator>& generator) {
  static auto op = FindOp<std::tuple<at::Tensor, at::Tensor>(
      const at::Tensor&, int64_t, double, std::optional<at::Generator>)>("mrcnn::sample_balanced");
  auto [pos, neg] = op.call(labels, batch_size_per_image, positive_fraction, generator);
  return {pos, neg};
}

at::Tensor PasteMasks(const at::Tensor& masks, const at::Tensor& boxes, int64_t image_height,
                      int64_t image_width, int64_t padding) {
  static auto op =
      FindOp<at::Tensor(const at::Tensor&, const at::Tensor&, int64_t, int64_t, int64_t)>(
          "mrcnn::paste_masks");
  return op.call(masks, boxes, image_height, image_width, padding);
}

at::Tensor WinogradConv3x3Weight(const at::Tensor& weight, int64_t tile) {
  static auto op = FindOp<at::Tensor(const at::Tensor&, int64_t)>("mrcnn::conv3x3_winograd_weight");
  return op.call(weight, tile);
}

at::Tensor WinogradConv3x3(const at::Tensor& input, const at::Tensor& transformed_weight,
                           const std::optional<at::Tensor>& bias, bool relu, int64_t tile) {
  static auto op =
      FindOp<at::Tensor(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
                        bool, int64_t)>("mrcnn::conv3x3_winograd");
  return op.call(input, transformed_weight, bias, relu, tile);
}

at::Tensor PasteMasksBinary(const at::Tensor& masks, const at::Tensor& boxes, int64_t image_height,
                            int64_t image_width, int64_t padding, double threshold) {
  static auto op =
      FindOp<at::Tensor(const at::Tensor&, const at::Tensor&, int64_t, int64_t, int64_t, double)>(
          "mrcnn::paste_masks_binary");
  return op.call(masks, boxes, image_height, image_width, padding, threshold);
}

std::pair<at::Tensor, at::Tensor> MaskRleChanges(const at::Tensor& masks) {
  static auto op =
      FindOp<std::tuple<at::Tensor, at::Tensor>(const at::Tensor&)>("mrcnn::mask_rle_changes");
  auto [changes, offsets] = op.call(masks);
  return {changes, offsets};
}

at::Tensor DeformConv2d(const at::Tensor& input, const at::Tensor& offset,
                        const std::optional<at::Tensor>& mask, const at::Tensor& weight,
                        const std::optional<at::Tensor>& bias, std::array<int64_t, 2> stride,
                        std::array<int64_t, 2> padding, std::array<int64_t, 2> dilation,
                        int64_t groups, int64_t offset_groups) {
  static auto op =
      FindOp<at::Tensor(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
                        const at::Tensor&, const std::optional<at::Tensor>&, at::IntArrayRef,
                        at::IntArrayRef, at::IntArrayRef, int64_t, int64_t)>(
          "mrcnn::deform_conv2d");
  // An undefined mask or bias means none, as std::nullopt does.
  const auto none_if_undefined = [](const std::optional<at::Tensor>& t) {
    return t.has_value() && t->defined() ? t : std::nullopt;
  };
  return op.call(input, offset, none_if_undefined(mask), weight, none_if_undefined(bias), stride,
                 padding, dilation, groups, offset_groups);
}

int64_t RegisteredOpCount() {
  int64_t count = 0;
  for (const auto& name : c10::Dispatcher::singleton().getAllOpNames()) {
    if (name.name.rfind("mrcnn::", 0) == 0) {
      ++count;
    }
  }
  return count;
}

}  // namespace mrcnn::kernels
