// The four registered ROIAlign ops as thin adapters over one device's two implementations
// (multi-level forward and backward), so the CPU and CUDA files register the same schema
// the same way: RoiAlignOps<&ForwardCpu, &BackwardCpu>::Forward etc. The backward's
// channels_last asks for the features' gradients in channels-last memory (the layout of
// features that FeaturesChannelsLast accepts), so a channels-last network gets them without
// a transform.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>

#include <cstdint>
#include <vector>

namespace mrcnn::kernels {

using RoiAlignForwardImpl = at::Tensor (*)(const std::vector<at::Tensor>& features,
                                           const at::Tensor& rois, const at::Tensor& levels,
                                           const std::vector<double>& scales, int64_t pooled_h,
                                           int64_t pooled_w, int64_t sampling_ratio, bool aligned,
                                           const char* op);
using RoiAlignBackwardImpl = std::vector<at::Tensor> (*)(
    const at::Tensor& grad, const at::Tensor& rois, const at::Tensor& levels,
    const std::vector<double>& scales, at::IntArrayRef feature_shapes, int64_t pooled_h,
    int64_t pooled_w, int64_t sampling_ratio, bool aligned, bool channels_last, const char* op);

template <RoiAlignForwardImpl ForwardImpl, RoiAlignBackwardImpl BackwardImpl>
struct RoiAlignOps {
  // mrcnn::roi_align: one level, torchvision.ops.roi_align's signature.
  static at::Tensor Forward(const at::Tensor& input, const at::Tensor& rois, double spatial_scale,
                            int64_t pooled_h, int64_t pooled_w, int64_t sampling_ratio,
                            bool aligned) {
    return ForwardImpl({input}, rois, at::Tensor(), {spatial_scale}, pooled_h, pooled_w,
                       sampling_ratio, aligned, "mrcnn::roi_align");
  }
  static at::Tensor Backward(const at::Tensor& grad, const at::Tensor& rois, double spatial_scale,
                             int64_t pooled_h, int64_t pooled_w, int64_t batch, int64_t channels,
                             int64_t height, int64_t width, int64_t sampling_ratio, bool aligned) {
    const std::vector<int64_t> shape{batch, channels, height, width};
    return BackwardImpl(grad, rois, at::Tensor(), {spatial_scale}, shape, pooled_h, pooled_w,
                        sampling_ratio, aligned, /*channels_last=*/false,
                        "mrcnn::_roi_align_backward")[0];
  }
  // mrcnn::_multi_level_roi_align: every FPN level in one op, `levels` per roi.
  static at::Tensor MultiLevelForward(at::TensorList features, const at::Tensor& rois,
                                      const at::Tensor& levels, at::ArrayRef<double> scales,
                                      int64_t pooled_h, int64_t pooled_w, int64_t sampling_ratio,
                                      bool aligned) {
    return ForwardImpl(features.vec(), rois, levels, scales.vec(), pooled_h, pooled_w,
                       sampling_ratio, aligned, "mrcnn::_multi_level_roi_align");
  }
  static std::vector<at::Tensor> MultiLevelBackward(
      const at::Tensor& grad, const at::Tensor& rois, const at::Tensor& levels,
      at::ArrayRef<double> scales, at::IntArrayRef feature_shapes, int64_t pooled_h,
      int64_t pooled_w, int64_t sampling_ratio, bool aligned, bool channels_last) {
    return BackwardImpl(grad, rois, levels, scales.vec(), feature_shapes, pooled_h, pooled_w,
                        sampling_ratio, aligned, channels_last,
                        "mrcnn::_multi_level_roi_align_backward");
  }
};

}  // namespace mrcnn::kernels
