// CUDA NMS and batched NMS. A 64×64-tile kernel builds the suppression bitmask
// (batched: boxes of different classes never suppress each other, so one launch
// covers all classes), then a single-block kernel walks the mask 64 boxes at a
// time on the device. The only host sync is reading the number of kept boxes, and
// batched_nms_keep_mask, which returns a mask, has none. nms_keep_mask_grouped runs many
// images' level-separated NMS in one launch of each kernel: a reducing block per image ×
// group, so the serial walk is one group long (32 steps for 2000 boxes) and all groups walk
// at once, instead of one image's whole set (~140 steps) per launch, image after image.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/nms/nms_args.h"
#include "kernels/nms/nms_threshold.h"

namespace mrcnn::kernels {
namespace {

constexpr int kBoxesPerBlock = 64;
constexpr int kReduceThreads = 1024;
// A group's block has few words to OR per step (32 for 2000 boxes): a quarter of the threads.
constexpr int kGroupReduceThreads = 256;
constexpr int64_t kMaxSharedWords = 6000;  // "removed" words that fit the 48 KiB of shared memory

__host__ __device__ inline int64_t CeilDiv(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// Boxes of block `block` (the last block may be partial).
__device__ inline int BlockSize(int64_t n, int64_t block) {
  const int64_t rest = n - block * kBoxesPerBlock;
  return static_cast<int>(rest < kBoxesPerBlock ? rest : kBoxesPerBlock);
}

// IoU > threshold with round-to-nearest intrinsics so the device rounds exactly like
// the CPU kernel (no fused multiply-adds).
__device__ inline bool Overlaps(const float* a, const float* b, float area_a, float area_b,
                                float threshold) {
  const float left = fmaxf(a[0], b[0]), right = fminf(a[2], b[2]);
  const float top = fmaxf(a[1], b[1]), bottom = fminf(a[3], b[3]);
  const float w = fmaxf(__fsub_rn(right, left), 0.f), h = fmaxf(__fsub_rn(bottom, top), 0.f);
  const float inter = __fmul_rn(w, h);
  return __fdiv_rn(inter, __fsub_rn(__fadd_rn(area_a, area_b), inter)) > threshold;
}

__device__ inline bool Overlaps(const double* a, const double* b, double area_a, double area_b,
                                double threshold) {
  const double left = fmax(a[0], b[0]), right = fmin(a[2], b[2]);
  const double top = fmax(a[1], b[1]), bottom = fmin(a[3], b[3]);
  const double w = fmax(__dsub_rn(right, left), 0.0), h = fmax(__dsub_rn(bottom, top), 0.0);
  const double inter = __dmul_rn(w, h);
  return __ddiv_rn(inter, __dsub_rn(__dadd_rn(area_a, area_b), inter)) > threshold;
}

template <typename T>
__device__ inline T Area(const T* b) {
  if constexpr (sizeof(T) == 4) {
    return __fmul_rn(__fsub_rn(b[2], b[0]), __fsub_rn(b[3], b[1]));
  } else {
    return __dmul_rn(__dsub_rn(b[2], b[0]), __dsub_rn(b[3], b[1]));
  }
}

// boxes: score-sorted n×4; classes: score-sorted ids or nullptr (plain NMS).
// mask[i * col_blocks + cb] bit j: box i suppresses box cb*64+j (only j > i matter).
// One 64-thread block computes the words of rows row_block × columns col_block.
template <typename T>
__device__ inline void SuppressionMaskWords(int64_t n, const T* __restrict__ boxes,
                                            const int64_t* __restrict__ classes, T threshold,
                                            uint64_t* __restrict__ mask, int64_t row_block,
                                            int64_t col_block) {
  if (row_block > col_block) {
    return;
  }
  const int64_t col_blocks = CeilDiv(n, kBoxesPerBlock);
  const int row_size = BlockSize(n, row_block);
  const int col_size = BlockSize(n, col_block);

  __shared__ T col_boxes[kBoxesPerBlock * 4];
  __shared__ T col_areas[kBoxesPerBlock];
  __shared__ int64_t col_classes[kBoxesPerBlock];
  if (threadIdx.x < col_size) {
    const int64_t j = col_block * kBoxesPerBlock + threadIdx.x;
    for (int k = 0; k < 4; ++k) {
      col_boxes[threadIdx.x * 4 + k] = boxes[j * 4 + k];
    }
    col_areas[threadIdx.x] = Area(boxes + j * 4);
    col_classes[threadIdx.x] = classes ? classes[j] : 0;
  }
  __syncthreads();
  if (threadIdx.x >= row_size) {
    return;
  }
  const int64_t i = row_block * kBoxesPerBlock + threadIdx.x;
  const T* box = boxes + i * 4;
  const T area = Area(box);
  const int64_t cls = classes ? classes[i] : 0;
  uint64_t bits = 0;
  const int start = row_block == col_block ? threadIdx.x + 1 : 0;
  for (int j = start; j < col_size; ++j) {
    if (col_classes[j] == cls && Overlaps(box, col_boxes + j * 4, area, col_areas[j], threshold)) {
      bits |= 1ULL << j;
    }
  }
  mask[i * col_blocks + col_block] = bits;
}

template <typename T>
__global__ void SuppressionMaskKernel(int64_t n, const T* __restrict__ boxes,
                                      const int64_t* __restrict__ classes, T threshold,
                                      uint64_t* __restrict__ mask) {
  SuppressionMaskWords(n, boxes, classes, threshold, mask, blockIdx.y, blockIdx.x);
}

// One block. Block b of 64 boxes is resolved serially by thread 0 from the diagonal
// mask words (loaded in parallel); then all threads OR the rows of b's survivors
// into the "removed" words of later blocks. With `usable`, the boxes it flags 0 start
// removed: they are never kept and suppress nothing.
__device__ inline void ReduceMaskWords(int64_t n, const uint64_t* __restrict__ mask,
                                       const uint8_t* __restrict__ usable,
                                       uint64_t* __restrict__ removed, uint8_t* __restrict__ keep) {
  __shared__ uint64_t diag[kBoxesPerBlock];
  __shared__ uint64_t kept_bits;
  const int64_t col_blocks = CeilDiv(n, kBoxesPerBlock);
  for (int64_t w = threadIdx.x; w < col_blocks; w += blockDim.x) {
    uint64_t gone = 0;
    if (usable) {
      const int size = BlockSize(n, w);
      for (int i = 0; i < size; ++i) {
        gone |= static_cast<uint64_t>(usable[w * kBoxesPerBlock + i] == 0) << i;
      }
    }
    removed[w] = gone;
  }
  __syncthreads();
  for (int64_t b = 0; b < col_blocks; ++b) {
    const int size = BlockSize(n, b);
    if (threadIdx.x < size) {
      diag[threadIdx.x] = mask[(b * kBoxesPerBlock + threadIdx.x) * col_blocks + b];
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      uint64_t gone = removed[b];
      uint64_t kept = 0;
      for (int i = 0; i < size; ++i) {
        if (!((gone >> i) & 1ULL)) {
          kept |= 1ULL << i;
          gone |= diag[i];
        }
      }
      kept_bits = kept;
    }
    __syncthreads();
    const uint64_t kept = kept_bits;
    if (threadIdx.x < size) {
      keep[b * kBoxesPerBlock + threadIdx.x] = static_cast<uint8_t>((kept >> threadIdx.x) & 1ULL);
    }
    for (int64_t w = b + 1 + threadIdx.x; w < col_blocks; w += blockDim.x) {
      uint64_t acc = removed[w];
      uint64_t rest = kept;
      while (rest) {
        const int i = __ffsll(static_cast<long long>(rest)) - 1;
        rest &= rest - 1;
        acc |= mask[(b * kBoxesPerBlock + i) * col_blocks + w];
      }
      removed[w] = acc;
    }
    __syncthreads();
  }
}

__global__ void ReduceMaskKernel(int64_t n, const uint64_t* __restrict__ mask,
                                 uint64_t* __restrict__ removed_global, bool removed_in_shared,
                                 uint8_t* __restrict__ keep) {
  extern __shared__ uint64_t removed_shared[];
  ReduceMaskWords(n, mask, nullptr, removed_in_shared ? removed_shared : removed_global, keep);
}

// nms_keep_mask_grouped: the groups' sizes, first columns and places in an image's mask words,
// passed by value (at most kMaxGroups groups: an FPN's levels).
constexpr int kMaxGroups = 16;
struct GroupLayout {
  int count;
  int64_t columns;          // N: boxes per image
  int64_t words_per_image;  // sum over groups of size × col_blocks
  int64_t start[kMaxGroups];
  int64_t size[kMaxGroups];
  int64_t mask_offset[kMaxGroups];
};

// Grid: x, y the column and row blocks of the largest group, z = image × group. Boxes,
// usable flags and the keep output are score-sorted within each group.
template <typename T>
__global__ void GroupedSuppressionMaskKernel(GroupLayout layout, const T* __restrict__ boxes,
                                             T threshold, uint64_t* __restrict__ mask) {
  const int64_t image = blockIdx.z / layout.count;
  const int group = static_cast<int>(blockIdx.z % layout.count);
  const int64_t n = layout.size[group];
  const int64_t col_blocks = CeilDiv(n, kBoxesPerBlock);
  if (static_cast<int64_t>(blockIdx.x) >= col_blocks ||
      static_cast<int64_t>(blockIdx.y) >= col_blocks) {
    return;
  }
  SuppressionMaskWords(n, boxes + (image * layout.columns + layout.start[group]) * 4, nullptr,
                       threshold, mask + image * layout.words_per_image + layout.mask_offset[group],
                       blockIdx.y, blockIdx.x);
}

// One block per image × group, all in one launch.
__global__ void GroupedReduceMaskKernel(GroupLayout layout, const uint64_t* __restrict__ mask,
                                        const uint8_t* __restrict__ usable,
                                        uint8_t* __restrict__ keep) {
  extern __shared__ uint64_t removed_shared[];
  const int64_t image = blockIdx.x / layout.count;
  const int group = static_cast<int>(blockIdx.x % layout.count);
  const int64_t first = image * layout.columns + layout.start[group];
  ReduceMaskWords(layout.size[group],
                  mask + image * layout.words_per_image + layout.mask_offset[group], usable + first,
                  removed_shared, keep + first);
}

// NMS of dets in score order; with class_keys, boxes of different keys never suppress
// each other, and boxes flagged in `dropped` (original order) are not kept. Returns the
// score order and, in that order, 1 for each kept box: no host sync.
std::pair<at::Tensor, at::Tensor> NmsKeepSorted(const at::Tensor& dets, const at::Tensor& scores,
                                                const at::Tensor* class_keys,
                                                const at::Tensor* dropped, double iou_threshold,
                                                const char* op) {
  const int64_t n = dets.size(0);
  const at::Tensor order = std::get<1>(scores.sort(/*stable=*/true, 0, /*descending=*/true));
  // Half/bfloat16 boxes are compared in float (their values are exact in float).
  const auto compute_dtype = dets.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  const at::Tensor sorted_boxes = dets.index_select(0, order).to(compute_dtype).contiguous();
  at::Tensor sorted_classes;
  if (class_keys) {
    sorted_classes = class_keys->index_select(0, order).contiguous();
  }
  const int64_t col_blocks = CeilDiv(n, kBoxesPerBlock);
  TORCH_CHECK(col_blocks <= 65535, op, ": at most ", 65535 * kBoxesPerBlock,
              " boxes per call are supported, got ", n);
  at::Tensor mask = at::empty({n * col_blocks}, dets.options().dtype(at::kLong));
  auto stream = at::cuda::getCurrentCUDAStream();
  const dim3 grid(static_cast<unsigned>(col_blocks), static_cast<unsigned>(col_blocks));
  AT_DISPATCH_FLOATING_TYPES(compute_dtype, "nms_cuda", [&] {
    SuppressionMaskKernel<scalar_t><<<grid, kBoxesPerBlock, 0, stream>>>(
        n, sorted_boxes.data_ptr<scalar_t>(),
        class_keys ? sorted_classes.data_ptr<int64_t>() : nullptr,
        StrictThreshold<scalar_t>(iou_threshold),
        reinterpret_cast<uint64_t*>(mask.data_ptr<int64_t>()));
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  at::Tensor keep = at::empty({n}, dets.options().dtype(at::kByte));
  const bool in_shared = col_blocks <= kMaxSharedWords;
  at::Tensor removed_global =
      at::empty({in_shared ? 0 : col_blocks}, dets.options().dtype(at::kLong));
  ReduceMaskKernel<<<1, kReduceThreads, in_shared ? col_blocks * sizeof(uint64_t) : 0, stream>>>(
      n, reinterpret_cast<const uint64_t*>(mask.data_ptr<int64_t>()),
      in_shared ? nullptr : reinterpret_cast<uint64_t*>(removed_global.data_ptr<int64_t>()),
      in_shared, keep.data_ptr<uint8_t>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  if (dropped) {
    keep.masked_fill_(dropped->index_select(0, order), 0);
  }
  return {order, keep};
}

at::Tensor NmsImpl(const at::Tensor& dets, const at::Tensor& scores, const at::Tensor* class_keys,
                   const at::Tensor* dropped, double iou_threshold, const char* op) {
  const auto [order, keep] = NmsKeepSorted(dets, scores, class_keys, dropped, iou_threshold, op);
  // nonzero synchronises once: the number of kept boxes sizes the output.
  return order.index_select(0, keep.nonzero().squeeze(1));
}

// The kept boxes as a mask in the boxes' own order.
at::Tensor KeepMask(const std::pair<at::Tensor, at::Tensor>& sorted) {
  const auto& [order, keep] = sorted;
  return at::zeros({order.size(0)}, keep.options().dtype(at::kBool))
      .scatter_(0, order, keep.to(at::kBool));
}

at::Tensor NmsCuda(const at::Tensor& dets, const at::Tensor& scores, double iou_threshold) {
  const char* op = "mrcnn::nms";
  CheckNmsInputs(dets, scores, op);
  TORCH_CHECK(dets.is_cuda(), op, ": boxes and scores must be CUDA tensors");
  const c10::cuda::CUDAGuard guard(dets.device());
  if (dets.size(0) == 0) {
    return at::empty({0}, dets.options().dtype(at::kLong));
  }
  return NmsImpl(dets, scores, nullptr, nullptr, iou_threshold, op);
}

// As the CPU kernel (see there): up to kBatchedNmsPerClassAbove boxes, NMS over
// torchvision's coordinate-trick boxes (every pair is compared anyway, so there is
// nothing to gain from a class test here); above, NMS per distinct idx value on the
// boxes as given, boxes with a NaN idx dropped.
at::Tensor BatchedNmsCuda(const at::Tensor& dets, const at::Tensor& scores, const at::Tensor& idxs,
                          double iou_threshold) {
  const char* op = "mrcnn::batched_nms";
  CheckNmsInputs(dets, scores, op);
  CheckIdxs(idxs, dets, op);
  TORCH_CHECK(dets.is_cuda(), op, ": boxes, scores and idxs must be CUDA tensors");
  const c10::cuda::CUDAGuard guard(dets.device());
  if (dets.size(0) == 0) {
    return at::empty({0}, dets.options().dtype(at::kLong));
  }
  if (dets.size(0) <= kBatchedNmsPerClassAbove) {
    return NmsImpl(CoordinateTrickBoxes(dets, idxs), scores, nullptr, nullptr, iou_threshold, op);
  }
  const at::Tensor keys = ClassKeys(idxs);
  at::Tensor keep;
  if (idxs.is_floating_point()) {
    const at::Tensor nan = at::isnan(idxs);
    keep = NmsImpl(dets, scores, &keys, &nan, iou_threshold, op);
  } else {
    keep = NmsImpl(dets, scores, &keys, nullptr, iou_threshold, op);
  }
  // torchvision's per-class algorithm orders its survivors with ATen's default (unstable)
  // descending sort of their scores taken in index order: the same two sorts here give
  // torchvision's order on this device, equal scores included (the CPU twin does the same
  // with the CPU sort, whose order among equal scores differs).
  const at::Tensor by_index = std::get<0>(keep.sort(0, false));
  return by_index.index_select(0, std::get<1>(scores.index_select(0, by_index).sort(0, true)));
}

// BatchedNmsCuda's kept set as a mask, with the same two algorithms: sizes known on the
// host only, so the call never waits for the device.
at::Tensor BatchedNmsKeepMaskCuda(const at::Tensor& dets, const at::Tensor& scores,
                                  const at::Tensor& idxs, double iou_threshold) {
  const char* op = "mrcnn::batched_nms_keep_mask";
  CheckNmsInputs(dets, scores, op);
  CheckIdxs(idxs, dets, op);
  TORCH_CHECK(dets.is_cuda(), op, ": boxes, scores and idxs must be CUDA tensors");
  const c10::cuda::CUDAGuard guard(dets.device());
  if (dets.size(0) == 0) {
    return at::zeros({0}, dets.options().dtype(at::kBool));
  }
  if (dets.size(0) <= kBatchedNmsPerClassAbove) {
    return KeepMask(NmsKeepSorted(CoordinateTrickBoxes(dets, idxs), scores, nullptr, nullptr,
                                  iou_threshold, op));
  }
  const at::Tensor keys = ClassKeys(idxs);
  if (idxs.is_floating_point()) {
    const at::Tensor nan = at::isnan(idxs);
    return KeepMask(NmsKeepSorted(dets, scores, &keys, &nan, iou_threshold, op));
  }
  return KeepMask(NmsKeepSorted(dets, scores, &keys, nullptr, iou_threshold, op));
}

// Every image's groups in two launches (the suppression words, then one reducing block per
// image × group) and a sort per group over all images; no host sync.
at::Tensor NmsKeepMaskGroupedCuda(const at::Tensor& dets, const at::Tensor& scores,
                                  const at::Tensor& usable, c10::IntArrayRef group_sizes,
                                  double iou_threshold) {
  const char* op = "mrcnn::nms_keep_mask_grouped";
  CheckGroupedNmsInputs(dets, scores, usable, group_sizes, op);
  TORCH_CHECK(dets.is_cuda(), op, ": boxes, scores and usable must be CUDA tensors");
  TORCH_CHECK(static_cast<int>(group_sizes.size()) <= kMaxGroups, op, ": at most ", kMaxGroups,
              " groups are supported, got ", group_sizes.size());
  const c10::cuda::CUDAGuard guard(dets.device());
  const int64_t images = dets.size(0), columns = dets.size(1);
  if (images == 0 || columns == 0) {
    return at::zeros(scores.sizes(), dets.options().dtype(at::kBool));
  }
  GroupLayout layout{};
  layout.count = static_cast<int>(group_sizes.size());
  layout.columns = columns;
  int64_t max_col_blocks = 0;
  std::vector<at::Tensor> orders;
  for (int g = 0; g < layout.count; ++g) {
    const int64_t size = group_sizes[g];
    const int64_t col_blocks = CeilDiv(size, kBoxesPerBlock);
    TORCH_CHECK(col_blocks <= kMaxSharedWords, op, ": at most ", kMaxSharedWords * kBoxesPerBlock,
                " boxes per group are supported, got ", size);
    layout.start[g] = g == 0 ? 0 : layout.start[g - 1] + layout.size[g - 1];
    layout.size[g] = size;
    layout.mask_offset[g] = layout.words_per_image;
    layout.words_per_image += size * col_blocks;
    max_col_blocks = std::max(max_col_blocks, col_blocks);
    if (size > 0) {
      // Descending, stable: equal scores keep the lower column first (the CPU twin's order).
      orders.push_back(std::get<1>(scores.narrow(1, layout.start[g], size).sort(true, 1, true)) +
                       layout.start[g]);
    }
  }
  if (max_col_blocks == 0) {
    return at::zeros(scores.sizes(), dets.options().dtype(at::kBool));
  }
  TORCH_CHECK(max_col_blocks <= 65535 && images * layout.count <= 65535, op,
              ": too many boxes per group or images × groups for one launch");
  const at::Tensor order = at::cat(orders, 1);
  const auto compute_dtype = dets.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  const at::Tensor sorted_boxes = dets.gather(1, order.unsqueeze(2).expand({images, columns, 4}))
                                      .to(compute_dtype)
                                      .contiguous();
  const at::Tensor sorted_usable = usable.gather(1, order).to(at::kByte).contiguous();
  at::Tensor mask = at::empty({images * layout.words_per_image}, dets.options().dtype(at::kLong));
  auto stream = at::cuda::getCurrentCUDAStream();
  const dim3 grid(static_cast<unsigned>(max_col_blocks), static_cast<unsigned>(max_col_blocks),
                  static_cast<unsigned>(images * layout.count));
  AT_DISPATCH_FLOATING_TYPES(compute_dtype, "nms_grouped_cuda", [&] {
    GroupedSuppressionMaskKernel<scalar_t><<<grid, kBoxesPerBlock, 0, stream>>>(
        layout, sorted_boxes.data_ptr<scalar_t>(), StrictThreshold<scalar_t>(iou_threshold),
        reinterpret_cast<uint64_t*>(mask.data_ptr<int64_t>()));
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  at::Tensor keep_sorted = at::empty({images, columns}, dets.options().dtype(at::kByte));
  GroupedReduceMaskKernel<<<static_cast<unsigned>(images * layout.count), kGroupReduceThreads,
                            max_col_blocks * sizeof(uint64_t), stream>>>(
      layout, reinterpret_cast<const uint64_t*>(mask.data_ptr<int64_t>()),
      sorted_usable.data_ptr<uint8_t>(), keep_sorted.data_ptr<uint8_t>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return at::zeros({images, columns}, dets.options().dtype(at::kBool))
      .scatter_(1, order, keep_sorted.to(at::kBool));
}

}  // namespace

TORCH_LIBRARY_IMPL(mrcnn, CUDA, m) {
  m.impl("nms", &NmsCuda);
  m.impl("batched_nms", &BatchedNmsCuda);
  m.impl("batched_nms_keep_mask", &BatchedNmsKeepMaskCuda);
  m.impl("nms_keep_mask_grouped", &NmsKeepMaskGroupedCuda);
}

}  // namespace mrcnn::kernels
