// CUDA mask_rle_changes (kernels/ops.h states the contract). Each mask's column-major pixels
// are cut into tiles of kTile; one launch counts every tile's changes, a scan of the counts
// gives each tile where its changes go, and a second launch writes them, in order within a
// tile by a block-wide scan per chunk of kThreads pixels. What then crosses to the host is
// 4 bytes per change (a few per column of each mask's box), not H×W bytes per mask.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <cstdint>
#include <limits>
#include <tuple>

#include "kernels/mask_rle/mask_rle_args.h"

namespace mrcnn::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kChunks = 8;
constexpr int64_t kTile = static_cast<int64_t>(kThreads) * kChunks;

// 1 where pixel i differs from pixel i - 1 (pixel -1 counts as background), 0 past the end.
__device__ __forceinline__ int ChangeAt(const uint8_t* __restrict__ mask, int64_t i,
                                        int64_t pixels) {
  if (i >= pixels) {
    return 0;
  }
  const bool value = mask[i] != 0;
  const bool before = i > 0 && mask[i - 1] != 0;
  return value != before ? 1 : 0;
}

// Exclusive prefix sum of one value per thread over the block; *total gets the block's sum.
// Every thread of the block must call it (it synchronises).
__device__ int BlockExclusiveSum(int value, int* total) {
  __shared__ int warp_sums[kWarps];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int inclusive = value;
  for (int d = 1; d < 32; d <<= 1) {
    const int up = __shfl_up_sync(0xffffffffu, inclusive, d);
    if (lane >= d) {
      inclusive += up;
    }
  }
  if (lane == 31) {
    warp_sums[warp] = inclusive;
  }
  __syncthreads();
  if (warp == 0) {
    int sum = lane < kWarps ? warp_sums[lane] : 0;
    for (int d = 1; d < kWarps; d <<= 1) {
      const int up = __shfl_up_sync(0xffffffffu, sum, d);
      if (lane >= d) {
        sum += up;
      }
    }
    if (lane < kWarps) {
      warp_sums[lane] = sum;
    }
  }
  __syncthreads();
  const int before = warp == 0 ? 0 : warp_sums[warp - 1];
  *total = warp_sums[kWarps - 1];
  __syncthreads();  // the next call writes warp_sums again
  return before + inclusive - value;
}

// Block b counts the changes of tile b % tiles of mask b / tiles.
__global__ void CountChangesKernel(const uint8_t* __restrict__ masks, int64_t pixels, int64_t tiles,
                                   int64_t* __restrict__ tile_counts) {
  const int64_t mask = blockIdx.x / tiles, tile = blockIdx.x % tiles;
  const uint8_t* m = masks + mask * pixels;
  const int64_t begin = tile * kTile;
  int count = 0;
  for (int c = 0; c < kChunks; ++c) {
    count += ChangeAt(m, begin + c * kThreads + threadIdx.x, pixels);
  }
  int total = 0;
  BlockExclusiveSum(count, &total);
  if (threadIdx.x == 0) {
    tile_counts[blockIdx.x] = total;
  }
}

// Block b writes tile b's change positions (within its mask) from tile_starts[b] on.
__global__ void WriteChangesKernel(const uint8_t* __restrict__ masks, int64_t pixels, int64_t tiles,
                                   const int64_t* __restrict__ tile_starts,
                                   int32_t* __restrict__ out) {
  const int64_t mask = blockIdx.x / tiles, tile = blockIdx.x % tiles;
  const uint8_t* m = masks + mask * pixels;
  const int64_t begin = tile * kTile;
  int64_t at = tile_starts[blockIdx.x];
  for (int c = 0; c < kChunks; ++c) {
    const int64_t i = begin + c * kThreads + threadIdx.x;
    const int flag = ChangeAt(m, i, pixels);
    int total = 0;
    const int rank = BlockExclusiveSum(flag, &total);
    if (flag != 0) {
      out[at + rank] = static_cast<int32_t>(i);
    }
    at += total;
  }
}

std::tuple<at::Tensor, at::Tensor> MaskRleChanges(const at::Tensor& masks) {
  constexpr const char* kOp = "mrcnn::mask_rle_changes";
  const c10::cuda::CUDAGuard guard(masks.device());
  const at::Tensor column_major = ColumnMajorMasks(kOp, masks);
  const int64_t n = column_major.size(0), pixels = column_major.size(1);
  const auto long_options = column_major.options().dtype(at::kLong);
  if (n == 0 || pixels == 0) {
    return {at::empty({0}, column_major.options().dtype(at::kInt)),
            at::zeros({n + 1}, long_options)};
  }
  const int64_t tiles = (pixels + kTile - 1) / kTile;
  TORCH_CHECK(n * tiles <= std::numeric_limits<int32_t>::max(), kOp, ": ", n, " masks of ", pixels,
              " pixels need more blocks than one launch has");
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const at::Tensor tile_counts = at::empty({n * tiles}, long_options);
  CountChangesKernel<<<static_cast<unsigned>(n * tiles), kThreads, 0, stream>>>(
      column_major.data_ptr<uint8_t>(), pixels, tiles, tile_counts.data_ptr<int64_t>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  const at::Tensor tile_ends = tile_counts.cumsum(0);
  const at::Tensor tile_starts = tile_ends - tile_counts;
  // The one wait: the output's size. The caller copies the output to the host next anyway.
  const int64_t total = tile_ends[-1].item<int64_t>();
  at::Tensor changes = at::empty({total}, column_major.options().dtype(at::kInt));
  if (total > 0) {
    WriteChangesKernel<<<static_cast<unsigned>(n * tiles), kThreads, 0, stream>>>(
        column_major.data_ptr<uint8_t>(), pixels, tiles, tile_starts.data_ptr<int64_t>(),
        changes.data_ptr<int32_t>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  at::Tensor offsets =
      at::cat({at::zeros({1}, long_options), tile_ends.view({n, tiles}).select(1, tiles - 1)});
  return {changes, offsets};
}

}  // namespace

TORCH_LIBRARY_IMPL(mrcnn, CUDA, m) {
  m.impl("mask_rle_changes", &MaskRleChanges);
}

}  // namespace mrcnn::kernels
