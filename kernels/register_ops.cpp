// The mrcnn op library: schemas, device-independent (composite) ops, autograd and
// autocast wrappers. Device kernels register themselves from kernels/<family>/{cpu,cuda}.
#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include <cmath>
#include <limits>
#include <optional>
#include <tuple>
#include <vector>

#include "kernels/anchors/anchor_grid.h"
#include "kernels/box_ops/box_ops_torchvision.h"
#include "kernels/roi_align/roi_align_args.h"
#include "kernels/sampling/balanced_sampler.h"

namespace mrcnn::kernels {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

at::Tensor CallRoiAlign(const at::Tensor& input, const at::Tensor& rois, double spatial_scale,
                        int64_t pooled_h, int64_t pooled_w, int64_t sampling_ratio, bool aligned) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("mrcnn::roi_align", "")
                       .typed<at::Tensor(const at::Tensor&, const at::Tensor&, double, int64_t,
                                         int64_t, int64_t, bool)>();
  return op.call(input, rois, spatial_scale, pooled_h, pooled_w, sampling_ratio, aligned);
}

at::Tensor CallRoiAlignBackward(const at::Tensor& grad, const at::Tensor& rois,
                                double spatial_scale, int64_t pooled_h, int64_t pooled_w,
                                int64_t batch, int64_t channels, int64_t height, int64_t width,
                                int64_t sampling_ratio, bool aligned) {
  static auto op =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("mrcnn::_roi_align_backward", "")
          .typed<at::Tensor(const at::Tensor&, const at::Tensor&, double, int64_t, int64_t, int64_t,
                            int64_t, int64_t, int64_t, int64_t, bool)>();
  return op.call(grad, rois, spatial_scale, pooled_h, pooled_w, batch, channels, height, width,
                 sampling_ratio, aligned);
}

at::Tensor CallMultiLevel(at::TensorList features, const at::Tensor& rois, const at::Tensor& levels,
                          at::ArrayRef<double> scales, int64_t pooled_h, int64_t pooled_w,
                          int64_t sampling_ratio, bool aligned) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("mrcnn::_multi_level_roi_align", "")
                       .typed<at::Tensor(at::TensorList, const at::Tensor&, const at::Tensor&,
                                         at::ArrayRef<double>, int64_t, int64_t, int64_t, bool)>();
  return op.call(features, rois, levels, scales, pooled_h, pooled_w, sampling_ratio, aligned);
}

std::vector<at::Tensor> CallMultiLevelBackward(const at::Tensor& grad, const at::Tensor& rois,
                                               const at::Tensor& levels,
                                               at::ArrayRef<double> scales,
                                               at::IntArrayRef feature_shapes, int64_t pooled_h,
                                               int64_t pooled_w, int64_t sampling_ratio,
                                               bool aligned, bool channels_last) {
  static auto op =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("mrcnn::_multi_level_roi_align_backward", "")
          .typed<std::vector<at::Tensor>(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                         at::ArrayRef<double>, at::IntArrayRef, int64_t, int64_t,
                                         int64_t, bool, bool)>();
  return op.call(grad, rois, levels, scales, feature_shapes, pooled_h, pooled_w, sampling_ratio,
                 aligned, channels_last);
}

class RoiAlignFunction : public torch::autograd::Function<RoiAlignFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const at::Tensor& input,
                               const at::Tensor& rois, double spatial_scale, int64_t pooled_h,
                               int64_t pooled_w, int64_t sampling_ratio, bool aligned) {
    ctx->saved_data["spatial_scale"] = spatial_scale;
    ctx->saved_data["pooled_h"] = pooled_h;
    ctx->saved_data["pooled_w"] = pooled_w;
    ctx->saved_data["sampling_ratio"] = sampling_ratio;
    ctx->saved_data["aligned"] = aligned;
    ctx->saved_data["input_shape"] = input.sizes();
    ctx->save_for_backward({rois});
    at::AutoDispatchBelowADInplaceOrView guard;
    return {CallRoiAlign(input, rois, spatial_scale, pooled_h, pooled_w, sampling_ratio, aligned)};
  }

  static variable_list backward(AutogradContext* ctx, const variable_list& grad_output) {
    const at::Tensor rois = ctx->get_saved_variables()[0];
    const auto shape = ctx->saved_data["input_shape"].toIntVector();
    const at::Tensor grad_input = CallRoiAlignBackward(
        grad_output[0], rois, ctx->saved_data["spatial_scale"].toDouble(),
        ctx->saved_data["pooled_h"].toInt(), ctx->saved_data["pooled_w"].toInt(), shape[0],
        shape[1], shape[2], shape[3], ctx->saved_data["sampling_ratio"].toInt(),
        ctx->saved_data["aligned"].toBool());
    return {grad_input,   at::Tensor(), at::Tensor(), at::Tensor(),
            at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

class MultiLevelRoiAlignFunction : public torch::autograd::Function<MultiLevelRoiAlignFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, at::TensorList features,
                               const at::Tensor& rois, const at::Tensor& levels,
                               const std::vector<double>& scales, int64_t pooled_h,
                               int64_t pooled_w, int64_t sampling_ratio, bool aligned) {
    std::vector<int64_t> shapes;
    for (const auto& f : features) {
      const auto s = f.sizes();
      shapes.insert(shapes.end(), s.begin(), s.end());
    }
    ctx->saved_data["shapes"] = shapes;
    ctx->saved_data["channels_last"] = FeaturesChannelsLast(features);
    ctx->saved_data["scales"] = scales;
    ctx->saved_data["pooled_h"] = pooled_h;
    ctx->saved_data["pooled_w"] = pooled_w;
    ctx->saved_data["sampling_ratio"] = sampling_ratio;
    ctx->saved_data["aligned"] = aligned;
    ctx->save_for_backward({rois, levels});
    at::AutoDispatchBelowADInplaceOrView guard;
    return {CallMultiLevel(features, rois, levels, scales, pooled_h, pooled_w, sampling_ratio,
                           aligned)};
  }

  static variable_list backward(AutogradContext* ctx, const variable_list& grad_output) {
    const auto saved = ctx->get_saved_variables();
    const auto shapes = ctx->saved_data["shapes"].toIntVector();
    const auto scales = ctx->saved_data["scales"].toDoubleVector();
    variable_list grads = CallMultiLevelBackward(
        grad_output[0], saved[0], saved[1], scales, shapes, ctx->saved_data["pooled_h"].toInt(),
        ctx->saved_data["pooled_w"].toInt(), ctx->saved_data["sampling_ratio"].toInt(),
        ctx->saved_data["aligned"].toBool(), ctx->saved_data["channels_last"].toBool());
    // rois, levels, scales, pooled_h, pooled_w, sampling_ratio, aligned: no gradient.
    grads.resize(grads.size() + 7);
    return grads;
  }
};

at::Tensor RoiAlignAutograd(const at::Tensor& input, const at::Tensor& rois, double spatial_scale,
                            int64_t pooled_h, int64_t pooled_w, int64_t sampling_ratio,
                            bool aligned) {
  return RoiAlignFunction::apply(input, rois, spatial_scale, pooled_h, pooled_w, sampling_ratio,
                                 aligned)[0];
}

at::Tensor MultiLevelAutograd(at::TensorList features, const at::Tensor& rois,
                              const at::Tensor& levels, at::ArrayRef<double> scales,
                              int64_t pooled_h, int64_t pooled_w, int64_t sampling_ratio,
                              bool aligned) {
  return MultiLevelRoiAlignFunction::apply(features, rois, levels, scales.vec(), pooled_h, pooled_w,
                                           sampling_ratio, aligned)[0];
}

// Autocast: ROIAlign runs in float32 and returns the input's dtype (as torchvision).
template <c10::DispatchKey key, c10::DeviceType device_type>
at::Tensor RoiAlignAutocast(const at::Tensor& input, const at::Tensor& rois, double spatial_scale,
                            int64_t pooled_h, int64_t pooled_w, int64_t sampling_ratio,
                            bool aligned) {
  c10::impl::ExcludeDispatchKeyGuard no_autocast(key);
  return CallRoiAlign(at::autocast::cached_cast(at::kFloat, input, device_type),
                      at::autocast::cached_cast(at::kFloat, rois, device_type), spatial_scale,
                      pooled_h, pooled_w, sampling_ratio, aligned)
      .to(input.scalar_type());
}

template <c10::DispatchKey key, c10::DeviceType device_type>
at::Tensor MultiLevelAutocast(at::TensorList features, const at::Tensor& rois,
                              const at::Tensor& levels, at::ArrayRef<double> scales,
                              int64_t pooled_h, int64_t pooled_w, int64_t sampling_ratio,
                              bool aligned) {
  c10::impl::ExcludeDispatchKeyGuard no_autocast(key);
  std::vector<at::Tensor> features_fp32;
  for (const auto& f : features) {
    features_fp32.push_back(at::autocast::cached_cast(at::kFloat, f, device_type));
  }
  return CallMultiLevel(features_fp32, at::autocast::cached_cast(at::kFloat, rois, device_type),
                        levels, scales, pooled_h, pooled_w, sampling_ratio, aligned)
      .to(features.empty() ? rois.scalar_type() : features[0].scalar_type());
}

using DeformConv2dSignature = at::Tensor(const at::Tensor&, const at::Tensor&,
                                         const std::optional<at::Tensor>&, const at::Tensor&,
                                         const std::optional<at::Tensor>&, at::IntArrayRef,
                                         at::IntArrayRef, at::IntArrayRef, int64_t, int64_t);

at::Tensor CallDeformConv2d(const at::Tensor& input, const at::Tensor& offset,
                            const std::optional<at::Tensor>& mask, const at::Tensor& weight,
                            const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                            at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups,
                            int64_t offset_groups) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("mrcnn::deform_conv2d", "")
                       .typed<DeformConv2dSignature>();
  return op.call(input, offset, mask, weight, bias, stride, padding, dilation, groups,
                 offset_groups);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> CallDeformConv2dBackward(
    const at::Tensor& grad, const at::Tensor& input, const at::Tensor& offset,
    const std::optional<at::Tensor>& mask, const at::Tensor& weight, at::IntArrayRef stride,
    at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups, int64_t offset_groups,
    bool bias_grad) {
  static auto op =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("mrcnn::_deform_conv2d_backward", "")
          .typed<std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>(
              const at::Tensor&, const at::Tensor&, const at::Tensor&,
              const std::optional<at::Tensor>&, const at::Tensor&, at::IntArrayRef, at::IntArrayRef,
              at::IntArrayRef, int64_t, int64_t, bool)>();
  return op.call(grad, input, offset, mask, weight, stride, padding, dilation, groups,
                 offset_groups, bias_grad);
}

// Differentiable w.r.t. input, offset, mask, weight and bias (first order). An absent mask
// or bias is no autograd input and gets no gradient.
class DeformConv2dFunction : public torch::autograd::Function<DeformConv2dFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const at::Tensor& input,
                               const at::Tensor& offset, const std::optional<at::Tensor>& mask,
                               const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                               const std::vector<int64_t>& stride,
                               const std::vector<int64_t>& padding,
                               const std::vector<int64_t>& dilation, int64_t groups,
                               int64_t offset_groups) {
    ctx->saved_data["stride"] = stride;
    ctx->saved_data["padding"] = padding;
    ctx->saved_data["dilation"] = dilation;
    ctx->saved_data["groups"] = groups;
    ctx->saved_data["offset_groups"] = offset_groups;
    ctx->saved_data["has_bias"] = bias.has_value();
    if (mask.has_value()) {
      ctx->save_for_backward({input, offset, weight, *mask});
    } else {
      ctx->save_for_backward({input, offset, weight});
    }
    at::AutoDispatchBelowADInplaceOrView guard;
    return {CallDeformConv2d(input, offset, mask, weight, bias, stride, padding, dilation, groups,
                             offset_groups)};
  }

  static variable_list backward(AutogradContext* ctx, const variable_list& grad_output) {
    const auto saved = ctx->get_saved_variables();
    const std::optional<at::Tensor> mask =
        saved.size() == 4 ? std::optional<at::Tensor>(saved[3]) : std::nullopt;
    auto [grad_input, grad_offset, grad_mask, grad_weight, grad_bias] = CallDeformConv2dBackward(
        grad_output[0], saved[0], saved[1], mask, saved[2], ctx->saved_data["stride"].toIntVector(),
        ctx->saved_data["padding"].toIntVector(), ctx->saved_data["dilation"].toIntVector(),
        ctx->saved_data["groups"].toInt(), ctx->saved_data["offset_groups"].toInt(),
        ctx->saved_data["has_bias"].toBool());
    // stride, padding, dilation, groups, offset_groups: no gradient.
    return {grad_input,   grad_offset,  grad_mask,    grad_weight,  grad_bias,
            at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

std::optional<at::Tensor> NoneIfUndefined(const std::optional<at::Tensor>& t) {
  return t.has_value() && t->defined() ? t : std::nullopt;
}

at::Tensor DeformConv2dAutograd(const at::Tensor& input, const at::Tensor& offset,
                                const std::optional<at::Tensor>& mask, const at::Tensor& weight,
                                const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                                at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups,
                                int64_t offset_groups) {
  return DeformConv2dFunction::apply(input, offset, NoneIfUndefined(mask), weight,
                                     NoneIfUndefined(bias), stride.vec(), padding.vec(),
                                     dilation.vec(), groups, offset_groups)[0];
}

// Autocast: deformable convolution runs in float32 and returns the input's dtype (as
// torchvision's deform_conv2d).
template <c10::DispatchKey key, c10::DeviceType device_type>
at::Tensor DeformConv2dAutocast(const at::Tensor& input, const at::Tensor& offset,
                                const std::optional<at::Tensor>& mask, const at::Tensor& weight,
                                const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                                at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups,
                                int64_t offset_groups) {
  c10::impl::ExcludeDispatchKeyGuard no_autocast(key);
  const auto to_float = [](const std::optional<at::Tensor>& t) -> std::optional<at::Tensor> {
    return t.has_value() && t->defined()
               ? std::optional<at::Tensor>(at::autocast::cached_cast(at::kFloat, *t, device_type))
               : std::nullopt;
  };
  return CallDeformConv2d(at::autocast::cached_cast(at::kFloat, input, device_type),
                          at::autocast::cached_cast(at::kFloat, offset, device_type),
                          to_float(mask),
                          at::autocast::cached_cast(at::kFloat, weight, device_type),
                          to_float(bias), stride, padding, dilation, groups, offset_groups)
      .to(input.scalar_type());
}

// -log2 of each FPN level scale (scales must be 1/2^k).
std::vector<int64_t> LevelIds(at::ArrayRef<double> scales, const char* op) {
  TORCH_CHECK(!scales.empty(), op, ": scales must name at least one level");
  std::vector<int64_t> level_ids;
  for (double s : scales) {
    TORCH_CHECK(s > 0 && s <= 1, op, ": every scale must be in (0, 1], got ", s);
    const double lvl = -std::log2(static_cast<float>(s));
    TORCH_CHECK(lvl == std::round(lvl), op, ": scale ", s,
                " is not a power of two (FPN level scales are 1/2^k)");
    level_ids.push_back(static_cast<int64_t>(lvl));
  }
  return level_ids;
}

// torchvision LevelMapper on K×5 rois, in the same float operations.
at::Tensor MapRoiLevels(const at::Tensor& rois, at::ArrayRef<double> scales,
                        int64_t canonical_scale, int64_t canonical_level) {
  const char* op = "mrcnn::map_roi_levels";
  TORCH_CHECK(rois.dim() == 2 && rois.size(1) == 5, op,
              ": rois must be K×5 (batch_index, x1, y1, x2, y2), got shape ", rois.sizes());
  TORCH_CHECK(canonical_scale > 0, op, ": canonical_scale must be positive");
  const std::vector<int64_t> level_ids = LevelIds(scales, op);
  // As torchvision's MultiScaleRoIAlign: the level range comes from the first and last
  // scale; level l of that range reads features[l].
  const int64_t k_min = level_ids.front(), k_max = level_ids.back();
  TORCH_CHECK(k_max >= k_min && k_max - k_min < static_cast<int64_t>(level_ids.size()), op,
              ": scales span levels ", k_min, "..", k_max, " but only ", level_ids.size(),
              " feature maps are given (scales must be finest first)");
  // box_area upcasts float16/bfloat16 to float32, so the levels are computed in float32.
  const at::Tensor s = at::sqrt(TorchvisionBoxArea(rois.slice(1, 1, 5)));
  const at::Tensor eps = at::scalar_tensor(1e-6, s.options());
  at::Tensor target = at::floor(at::log2(s / canonical_scale) + canonical_level + eps);
  target = at::clamp(target, static_cast<double>(k_min), static_cast<double>(k_max));
  // A NaN target (NaN or negative area) becomes INT64_MIN - k_min, the value
  // torchvision's cast gives on x86 CPUs, here on every device: outside every level,
  // so the roi pools zeros.
  const at::Tensor nan_level =
      at::full_like(target, std::numeric_limits<int64_t>::min(), target.options().dtype(at::kLong));
  return at::where(at::isnan(target), nan_level, target.to(at::kLong)) - k_min;
}

at::Tensor MultiLevelRoiAlignComposite(at::TensorList features, const at::Tensor& rois,
                                       at::ArrayRef<double> scales, int64_t pooled_h,
                                       int64_t pooled_w, int64_t sampling_ratio, bool aligned,
                                       int64_t canonical_scale, int64_t canonical_level) {
  TORCH_CHECK(features.size() == scales.size(), "mrcnn::multi_level_roi_align: got ",
              features.size(), " feature maps but ", scales.size(), " scales");
  if (features.size() == 1) {
    LevelIds(scales, "mrcnn::multi_level_roi_align");
    // As MultiScaleRoIAlign: one level is a plain roi_align (no level mapping, so rois
    // of NaN area are pooled like any other).
    return CallRoiAlign(features[0], rois, scales[0], pooled_h, pooled_w, sampling_ratio, aligned);
  }
  const at::Tensor levels = MapRoiLevels(rois, scales, canonical_scale, canonical_level);
  return CallMultiLevel(features, rois, levels, scales, pooled_h, pooled_w, sampling_ratio,
                        aligned);
}

std::tuple<at::Tensor, at::Tensor> SampleBalancedOp(const at::Tensor& labels,
                                                    int64_t batch_size_per_image,
                                                    double positive_fraction,
                                                    std::optional<at::Generator> generator) {
  return SampleBalancedMasks(labels, batch_size_per_image, positive_fraction, generator);
}

}  // namespace

TORCH_LIBRARY(mrcnn, m) {
  m.def("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor");
  m.def("batched_nms(Tensor boxes, Tensor scores, Tensor idxs, float iou_threshold) -> Tensor");
  m.def(
      "batched_nms_keep_mask(Tensor boxes, Tensor scores, Tensor idxs, float iou_threshold) -> "
      "Tensor");
  m.def(
      "nms_keep_mask_grouped(Tensor boxes, Tensor scores, Tensor usable, int[] group_sizes, "
      "float iou_threshold) -> Tensor");
  m.def(
      "roi_align(Tensor input, Tensor rois, float spatial_scale, int pooled_height, "
      "int pooled_width, int sampling_ratio, bool aligned) -> Tensor");
  m.def(
      "_roi_align_backward(Tensor grad, Tensor rois, float spatial_scale, int pooled_height, "
      "int pooled_width, int batch_size, int channels, int height, int width, "
      "int sampling_ratio, bool aligned) -> Tensor");
  m.def(
      "map_roi_levels(Tensor rois, float[] scales, int canonical_scale=224, "
      "int canonical_level=4) -> Tensor");
  m.def(
      "multi_level_roi_align(Tensor[] features, Tensor rois, float[] scales, int pooled_height, "
      "int pooled_width, int sampling_ratio, bool aligned, int canonical_scale=224, "
      "int canonical_level=4) -> Tensor");
  m.def(
      "_multi_level_roi_align(Tensor[] features, Tensor rois, Tensor levels, float[] scales, "
      "int pooled_height, int pooled_width, int sampling_ratio, bool aligned) -> Tensor");
  m.def(
      "_multi_level_roi_align_backward(Tensor grad, Tensor rois, Tensor levels, float[] scales, "
      "int[] feature_shapes, int pooled_height, int pooled_width, int sampling_ratio, "
      "bool aligned, bool channels_last=False) -> Tensor[]");
  m.def("box_iou(Tensor boxes1, Tensor boxes2) -> Tensor");
  m.def("conv3x3_winograd_weight(Tensor weight, int tile) -> Tensor");
  m.def(
      "conv3x3_winograd(Tensor input, Tensor transformed_weight, Tensor? bias, bool relu, "
      "int tile) -> Tensor");
  m.def("encode_boxes(Tensor reference_boxes, Tensor proposals, float[] weights) -> Tensor");
  m.def("decode_boxes(Tensor rel_codes, Tensor boxes, float[] weights, float clamp) -> Tensor");
  m.def(
      "generate_anchors(int[] feature_sizes, int[] strides, float[] sizes, int[] sizes_per_level, "
      "float[] aspect_ratios, int[] ratios_per_level, Device device) -> Tensor");
  m.def(
      "match_proposals(Tensor match_quality, float high_threshold, float low_threshold, "
      "bool allow_low_quality_matches) -> Tensor");
  m.def(
      "sample_balanced(Tensor labels, int batch_size_per_image, float positive_fraction, "
      "Generator? generator=None) -> (Tensor, Tensor)");
  m.def(
      "paste_masks(Tensor masks, Tensor boxes, int image_height, int image_width, "
      "int padding=1) -> Tensor");
  m.def(
      "paste_masks_binary(Tensor masks, Tensor boxes, int image_height, int image_width, "
      "int padding, float threshold) -> Tensor");
  m.def("mask_rle_changes(Tensor masks) -> (Tensor, Tensor)");
  m.def(
      "deform_conv2d(Tensor input, Tensor offset, Tensor? mask, Tensor weight, Tensor? bias=None, "
      "int[2] stride=1, int[2] padding=0, int[2] dilation=1, int groups=1, "
      "int offset_groups=1) -> Tensor");
  m.def(
      "_deform_conv2d_backward(Tensor grad, Tensor input, Tensor offset, Tensor? mask, "
      "Tensor weight, int[2] stride, int[2] padding, int[2] dilation, int groups, "
      "int offset_groups, bool bias_grad) -> (Tensor, Tensor, Tensor, Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(mrcnn, CompositeImplicitAutograd, m) {
  m.impl("map_roi_levels", &MapRoiLevels);
  m.impl("multi_level_roi_align", &MultiLevelRoiAlignComposite);
  m.impl("generate_anchors", &GenerateAnchorGrid);
  m.impl("sample_balanced", &SampleBalancedOp);
}

TORCH_LIBRARY_IMPL(mrcnn, Autograd, m) {
  m.impl("roi_align", &RoiAlignAutograd);
  m.impl("_multi_level_roi_align", &MultiLevelAutograd);
  m.impl("deform_conv2d", &DeformConv2dAutograd);
}

TORCH_LIBRARY_IMPL(mrcnn, AutocastCPU, m) {
  m.impl("roi_align", &RoiAlignAutocast<c10::DispatchKey::AutocastCPU, c10::DeviceType::CPU>);
  m.impl("_multi_level_roi_align",
         &MultiLevelAutocast<c10::DispatchKey::AutocastCPU, c10::DeviceType::CPU>);
  m.impl("deform_conv2d",
         &DeformConv2dAutocast<c10::DispatchKey::AutocastCPU, c10::DeviceType::CPU>);
}

TORCH_LIBRARY_IMPL(mrcnn, AutocastCUDA, m) {
  m.impl("roi_align", &RoiAlignAutocast<c10::DispatchKey::AutocastCUDA, c10::DeviceType::CUDA>);
  m.impl("_multi_level_roi_align",
         &MultiLevelAutocast<c10::DispatchKey::AutocastCUDA, c10::DeviceType::CUDA>);
  m.impl("deform_conv2d",
         &DeformConv2dAutocast<c10::DispatchKey::AutocastCUDA, c10::DeviceType::CUDA>);
}

}  // namespace mrcnn::kernels
