// Public C++ entry points of the mrcnn kernels library (target `mrcnn_kernels`,
// build*/lib/libmrcnn_kernels.so). Every function calls the op registered in the
// torch namespace `mrcnn` through the dispatcher, so CPU/CUDA selection, autograd
// and autocast apply exactly as they do for `torch.ops.mrcnn.*` from Python.
//
// Box convention everywhere: (x1, y1, x2, y2) in pixels, float32 unless stated.
// Semantics follow torchvision 0.26 (the oracle tests in test/oracle/kernels check
// them against torchvision on randomised inputs).
//
// Host-device synchronisation on CUDA: Nms and BatchedNms synchronise once, to
// learn how many boxes are kept (the output size depends on it); BatchedNmsKeepMask
// gives the same answer as a mask and does not. GenerateAnchors
// copies its few sizes/ratios from host memory to the device (as torchvision does;
// cache anchors per feature-map size). RoiAlign, MultiLevelRoiAlign, BoxIou,
// EncodeBoxes, DecodeBoxes, MatchProposals, SampleBalanced, PasteMasks and DeformConv2d
// never synchronise.
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace mrcnn::kernels {

// Indices (int64) of the boxes kept by greedy non-maximum suppression, in order of
// decreasing score (ties: lower index first). A box is suppressed when its IoU with
// a kept, higher-scoring box is > iou_threshold, with IoU computed in the box dtype
// exactly as torchvision does (so zero-area or overflowing boxes give NaN IoU and
// never suppress). boxes: N×4 float32/float64 (CUDA also half/bfloat16), scores: N.
at::Tensor Nms(const at::Tensor& boxes, const at::Tensor& scores, double iou_threshold);

// torchvision.ops.batched_nms has two algorithms, picked by size: up to this many
// boxes (4000 box coordinates on CPU) it runs one NMS over boxes shifted by
// idx * (max coordinate + 1) (the "coordinate trick"), above it a separate NMS per
// distinct idx value. Both devices here follow its CPU choice, so they agree.
inline constexpr int64_t kBatchedNmsPerClassAbove = 1000;

// NMS applied independently within each value of idxs (N, any real dtype; classes are
// distinct values), in one pass (no per-class loop). Result: kept indices sorted by
// decreasing score, identical to torchvision.ops.batched_nms (CPU), which has two
// algorithms and so do we: up to 1000 boxes, IoUs are taken on torchvision's
// coordinate-trick boxes (boxes + idx * (max coordinate + 1)), so they round as there,
// and where that trick lets classes interact (IoU threshold < 0, negative coordinates,
// fractional or non-finite idxs, NaN/inf boxes) the result is torchvision's; above
// 1000 boxes, per-class NMS on the boxes as given, boxes with a NaN idx never kept,
// equal scores ordered by ATen's default descending sort (on CUDA: lower index first).
at::Tensor BatchedNms(const at::Tensor& boxes, const at::Tensor& scores, const at::Tensor& idxs,
                      double iou_threshold);

// BatchedNms's kept boxes as a bool mask over the N boxes (true: kept), in their own
// order: a size known without the device, so a training step can select its proposals
// without waiting for the GPU.
at::Tensor BatchedNmsKeepMask(const at::Tensor& boxes, const at::Tensor& scores,
                              const at::Tensor& idxs, double iou_threshold);

// Many images' NMS at once, each image's columns cut into groups (an FPN's levels) that never
// suppress each other: boxes B×N×4, scores B×N (float32/float64), usable B×N bool, group_sizes
// tiling the N columns (at most 16 groups). Result B×N bool: for each image and group, greedy
// NMS over that group's usable boxes in decreasing score order (ties: lower column first),
// IoU rounded as Nms; unusable boxes are never kept and suppress nothing. That is, per image,
// torchvision.ops.batched_nms's per-class algorithm (which it runs above 1000 boxes) over the
// usable boxes with the group as the class. CUDA: two launches for the whole batch and one
// sort per group, no host sync (the training step's RPN, issue 39).
at::Tensor NmsKeepMaskGrouped(const at::Tensor& boxes, const at::Tensor& scores,
                              const at::Tensor& usable, c10::IntArrayRef group_sizes,
                              double iou_threshold);

// ROIAlign (torchvision.ops.roi_align semantics). input: B×C×H×W, rois: K×5
// (batch_idx, x1, y1, x2, y2) of the same dtype. Returns K×C×pooled_h×pooled_w.
// Differentiable w.r.t. input. Under autocast it runs in float32 and returns the
// input's dtype. float32/float64/float16/bfloat16 accepted (float accumulation).
// As torchvision: sampling_ratio <= 0 (its default is -1) samples adaptively,
// ceil(roi_size / pooled_size) points per bin and axis; pooled sizes may be 0 (empty
// output); any spatial_scale is taken. Degenerate rois: a sampling point with a NaN
// coordinate (the other inside the map) makes its bin NaN and sends no gradient; an
// adaptive grid that is NaN, infinite or beyond int32 samples nothing (zeros, as
// torchvision's CPU kernel on x86); an empty feature map pools zeros.
// A roi whose batch index is outside [0, B) (or NaN), or whose adaptive grid needs more
// than 2^31-1 sampling points, is an error on CPU; on CUDA (where checking would need
// a sync) it pools zeros and receives no gradient.
at::Tensor RoiAlign(const at::Tensor& input, const at::Tensor& rois, double spatial_scale,
                    int64_t pooled_height, int64_t pooled_width, int64_t sampling_ratio,
                    bool aligned);

// FPN ROIAlign over all levels in one call. features[l]: B×C×H_l×W_l with
// scales[l] = spatial scale of level l (e.g. 1/4, 1/8, 1/16, 1/32; powers of two,
// finest first). Each roi (K×5 as in RoiAlign) goes to the level given by
// torchvision's LevelMapper: floor(canonical_level + log2(sqrt(area)/canonical_scale)
// + 1e-6) clamped to [-log2(scales.front()), -log2(scales.back())] (area in float32 for
// float16/bfloat16 rois, as torchvision's box_area). A roi whose area is NaN or negative
// (NaN coordinates, x2 < x1) has no level and pools zeros, as in MultiScaleRoIAlign; with
// a single level every roi goes to it (plain RoiAlign), as there. Output
// K×C×pooled_h×pooled_w in input roi order; differentiable w.r.t. every feature map.
at::Tensor MultiLevelRoiAlign(const std::vector<at::Tensor>& features, const at::Tensor& rois,
                              const std::vector<double>& scales, int64_t pooled_height,
                              int64_t pooled_width, int64_t sampling_ratio, bool aligned,
                              int64_t canonical_scale = 224, int64_t canonical_level = 4);

// Pairwise IoU, a: N×4, b: M×4 -> N×M (torchvision.ops.box_iou). Everything
// torchvision.ops.box_iou takes is taken, with its result: batch dimensions
// ([..., N, 4] × [..., M, 4] -> [..., N, M], broadcast; a may be one box [4]), mixed
// dtypes (promoted), float16/bfloat16 (areas and intersections in float32, float32
// result), integer boxes (integer arithmetic, default-float result). 2-D float32/float64
// boxes of one dtype run the kernel; the rest uses torchvision's formula as ATen ops.
at::Tensor BoxIou(const at::Tensor& a, const at::Tensor& b);

// Regression targets of reference_boxes (gt, N×4) relative to proposals (N×4) with
// weights (wx, wy, ww, wh): torchvision BoxCoder.encode_single. Returns N×4. Mixed
// dtypes promote and float16/bfloat16 compute in their dtype, as torchvision.
at::Tensor EncodeBoxes(const at::Tensor& reference_boxes, const at::Tensor& proposals,
                       const std::array<double, 4>& weights);

// Inverse of EncodeBoxes: rel_codes N×(4k) applied to boxes N×4 -> N×(4k)
// (torchvision BoxCoder.decode_single; dw/dh clamped at `clamp` before exp; boxes cast
// to the codes' dtype, float16/bfloat16 computed in that dtype as torchvision).
at::Tensor DecodeBoxes(const at::Tensor& rel_codes, const at::Tensor& boxes,
                       const std::array<double, 4>& weights, double clamp = std::log(1000.0 / 16));

// Anchors of one image, identical to torchvision AnchorGenerator: level i has a
// feature map of feature_sizes[i] = (H_i, W_i), stride strides[i] = (sh_i, sw_i),
// sizes[i] and aspect_ratios[i] (anchor order per location: ratios outer, sizes
// inner; locations row-major). Returns the concatenation over levels, float32,
// sum_i H_i*W_i*|sizes_i|*|ratios_i| × 4, on `device`.
at::Tensor GenerateAnchors(const std::vector<std::array<int64_t, 2>>& feature_sizes,
                           const std::vector<std::array<int64_t, 2>>& strides,
                           const std::vector<std::vector<double>>& sizes,
                           const std::vector<std::vector<double>>& aspect_ratios,
                           const at::Device& device);

// torchvision Matcher: match_quality G×N (gt × predictions, G,N >= 1) -> int64 N with
// the best gt index per prediction, -1 where the best quality < low_threshold, -2
// where low <= best < high. allow_low_quality_matches restores the best match of
// every prediction that is a (tied) highest-quality prediction of some gt. Thresholds
// compare in the matrix dtype (float32/float64/float16/bfloat16) and NaN counts as the
// largest quality, as torch.max does.
at::Tensor MatchProposals(const at::Tensor& match_quality, double high_threshold,
                          double low_threshold, bool allow_low_quality_matches);

// torchvision BalancedPositiveNegativeSampler for one image: labels (N; >= 1
// positive, 0 negative, -1 ignored) -> (pos_mask, neg_mask), bool N each, with
// min(#pos, floor(batch*fraction)) positives and min(#neg, batch - #sampled pos)
// negatives chosen uniformly at random using `generator` (default generator when
// empty).
std::pair<at::Tensor, at::Tensor> SampleBalanced(
    const at::Tensor& labels, int64_t batch_size_per_image, double positive_fraction,
    const std::optional<at::Generator>& generator = std::nullopt);

// torchvision paste_masks_in_image: masks N×1×R×R (probabilities), boxes N×4 in
// image pixels -> N×1×image_height×image_width, same dtype as masks. Each mask is
// padded by `padding` zero pixels, its box expanded by (R+2p)/R in the boxes' dtype (as
// torchvision: float16/bfloat16/float64/integer boxes round there) and truncated to
// integers, and the padded mask bilinearly resized (align_corners=False) into it.
at::Tensor PasteMasks(const at::Tensor& masks, const at::Tensor& boxes, int64_t image_height,
                      int64_t image_width, int64_t padding = 1);

// PasteMasks(...) >= threshold (compared in the mask dtype) as N×1×H×W uint8 0/1, without
// the full-size float map: a quarter of the memory traffic.
at::Tensor PasteMasksBinary(const at::Tensor& masks, const at::Tensor& boxes, int64_t image_height,
                            int64_t image_width, int64_t padding, double threshold);

// COCO RLE of binary masks, as change points: masks N×1×H×W or N×H×W (uint8, nonzero =
// foreground; or bool) -> (changes int32, offsets int64 of N+1) on the masks' device. Mask
// i's changes[offsets[i] .. offsets[i+1]) are, increasing, the indices in COCO's column-major
// order (x outer, y inner) where its value differs from the pixel before (pixel -1 counts as
// background); data::RleFromChanges makes of them the RLE data::EncodeMask gives. H·W must
// fit int32. On CUDA it waits once on the stream (the output's size); what then has to reach
// the host is 4 bytes per change, a few per column of each mask's box, not H×W bytes.
std::pair<at::Tensor, at::Tensor> MaskRleChanges(const at::Tensor& masks);

// 3×3 convolution, stride 1, padding 1, no dilation or groups, float32 CPU only, by
// Winograd F(tile×tile, 3×3) with tile 2, 4 or 6: WinogradConv3x3Weight turns a K×C×3×3
// weight into the alpha²×K×C form (alpha = tile + 2) once; WinogradConv3x3 then computes
// relu?(conv2d(input, weight, bias, 1, 1)) for N×C×H×W input. No autograd: inference only.
// Results differ from a direct convolution by float rounding only (see winograd_tiles.h).
at::Tensor WinogradConv3x3Weight(const at::Tensor& weight, int64_t tile);
at::Tensor WinogradConv3x3(const at::Tensor& input, const at::Tensor& transformed_weight,
                           const std::optional<at::Tensor>& bias, bool relu, int64_t tile);

// Deformable convolution, torchvision.ops.deform_conv2d semantics (DCN v1 without mask,
// modulated DCN v2 with it), also Detectron2's DeformConv / ModulatedDeformConv forward.
// input B×C_in×H×W, weight C_out×(C_in/groups)×kh×kw, bias C_out (optional), offset
// B×(2·offset_groups·kh·kw)×out_h×out_w, mask B×(offset_groups·kh·kw)×out_h×out_w (optional;
// std::nullopt or an undefined tensor for v1), out = (in + 2·pad − dilation·(k−1) − 1)/stride + 1.
// Offset channel 2·(g·kh·kw + i·kw + j) is the row (y) displacement of kernel tap (i, j) in
// deformable group g (input channels [g·C_in/offset_groups, (g+1)·C_in/offset_groups)), the
// next channel its column (x) displacement; mask channel g·kh·kw + i·kw + j scales that
// tap's sample. A sample at (y, x) in the open box (−1, H)×(−1, W) is bilinear with zero
// padding; outside it is 0. float32/float64 (autocast: float32, returns the input's dtype);
// differentiable w.r.t. input, offset, mask, weight and bias. Returns B×C_out×out_h×out_w.
at::Tensor DeformConv2d(const at::Tensor& input, const at::Tensor& offset,
                        const std::optional<at::Tensor>& mask, const at::Tensor& weight,
                        const std::optional<at::Tensor>& bias,
                        std::array<int64_t, 2> stride = {1, 1},
                        std::array<int64_t, 2> padding = {0, 0},
                        std::array<int64_t, 2> dilation = {1, 1}, int64_t groups = 1,
                        int64_t offset_groups = 1);

// Makes sure the library (and so its op registrations) is loaded by a program that
// links it; returns the number of registered mrcnn ops. Calling it is optional for
// code that already calls any function above.
int64_t RegisteredOpCount();

}  // namespace mrcnn::kernels
