// CUDA NMS and batched NMS. A 64×64-tile kernel builds the suppression bitmask
// (batched: boxes of different classes never suppress each other, so one launch
// covers all classes), then a single-block kernel walks the mask 64 boxes at a
// time on the device. The only host sync is reading the number of kept boxes, and
// batched_nms_keep_mask, which returns a mask, has none.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <cstdint>
#include <utility>

#include "kernels/nms/nms_args.h"
#include "kernels/nms/nms_threshold.h"

namespace mrcnn::kernels {
namespace {

constexpr int kBoxesPerBlock = 64;
constexpr int kReduceThreads = 1024;
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
template <typename T>
__global__ void SuppressionMaskKernel(int64_t n, const T* __restrict__ boxes,
                                      const int64_t* __restrict__ classes, T threshold,
                                      uint64_t* __restrict__ mask) {
  const int64_t row_block = blockIdx.y, col_block = blockIdx.x;
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

// One block. Block b of 64 boxes is resolved serially by thread 0 from the diagonal
// mask words (loaded in parallel); then all threads OR the rows of b's survivors
// into the "removed" words of later blocks.
__global__ void ReduceMaskKernel(int64_t n, const uint64_t* __restrict__ mask,
                                 uint64_t* __restrict__ removed_global, bool removed_in_shared,
                                 uint8_t* __restrict__ keep) {
  extern __shared__ uint64_t removed_shared[];
  __shared__ uint64_t diag[kBoxesPerBlock];
  __shared__ uint64_t kept_bits;
  const int64_t col_blocks = CeilDiv(n, kBoxesPerBlock);
  uint64_t* removed = removed_in_shared ? removed_shared : removed_global;
  for (int64_t w = threadIdx.x; w < col_blocks; w += blockDim.x) {
    removed[w] = 0;
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

}  // namespace

TORCH_LIBRARY_IMPL(mrcnn, CUDA, m) {
  m.impl("nms", &NmsCuda);
  m.impl("batched_nms", &BatchedNmsCuda);
  m.impl("batched_nms_keep_mask", &BatchedNmsKeepMaskCuda);
}

}  // namespace mrcnn::kernels
