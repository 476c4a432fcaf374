// CPU NMS and batched NMS. Boxes are gathered into contiguous score-sorted arrays so
// the inner IoU loop is branch-free and vectorisable; batched NMS runs the classes
// in parallel. IoU arithmetic matches torchvision's CPU kernel operation for
// operation, so keep indices are identical.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "kernels/nms/nms_args.h"
#include "kernels/nms/nms_threshold.h"

namespace mrcnn::kernels {
namespace {

// Greedy suppression over `count` boxes already sorted by decreasing score, stored
// as separate coordinate arrays. keep[i] = 1 for survivors.
template <typename T>
void SuppressSorted(const T* x1, const T* y1, const T* x2, const T* y2, const T* areas,
                    int64_t count, T threshold, uint8_t* suppressed) {
  for (int64_t i = 0; i < count; ++i) {
    if (suppressed[i]) {
      continue;
    }
    const T ix1 = x1[i], iy1 = y1[i], ix2 = x2[i], iy2 = y2[i], iarea = areas[i];
    for (int64_t j = i + 1; j < count; ++j) {
      const T xx1 = std::max(ix1, x1[j]);
      const T yy1 = std::max(iy1, y1[j]);
      const T xx2 = std::min(ix2, x2[j]);
      const T yy2 = std::min(iy2, y2[j]);
      const T w = std::max(static_cast<T>(0), xx2 - xx1);
      const T h = std::max(static_cast<T>(0), yy2 - yy1);
      const T inter = w * h;
      const T ovr = inter / (iarea + areas[j] - inter);
      suppressed[j] |= static_cast<uint8_t>(ovr > threshold);
    }
  }
}

template <typename T>
struct SortedBoxes {
  std::vector<T> x1, y1, x2, y2, areas;
  explicit SortedBoxes(int64_t n) : x1(n), y1(n), x2(n), y2(n), areas(n) {}
};

// Gathers boxes[order[k]] into position k of the coordinate arrays.
template <typename T>
void GatherSorted(const at::Tensor& boxes, const int64_t* order, int64_t n, SortedBoxes<T>& out) {
  const T* b = boxes.data_ptr<T>();
  at::parallel_for(0, n, 4096, [&](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k) {
      const T* row = b + order[k] * 4;
      out.x1[k] = row[0];
      out.y1[k] = row[1];
      out.x2[k] = row[2];
      out.y2[k] = row[3];
      out.areas[k] = (row[2] - row[0]) * (row[3] - row[1]);
    }
  });
}

at::Tensor KeptIndices(const std::vector<uint8_t>& suppressed, const int64_t* order) {
  const int64_t n = static_cast<int64_t>(suppressed.size());
  const int64_t kept = n - std::count(suppressed.begin(), suppressed.end(), uint8_t{1});
  at::Tensor keep = at::empty({kept}, at::kLong);
  int64_t* out = keep.data_ptr<int64_t>();
  for (int64_t k = 0, o = 0; k < n; ++k) {
    if (!suppressed[k]) {
      out[o++] = order[k];
    }
  }
  return keep;
}

// Plain NMS of `boxes` (contiguous) in score order.
at::Tensor NmsKeep(const at::Tensor& boxes, const at::Tensor& scores, double iou_threshold) {
  const at::Tensor order = std::get<1>(scores.sort(/*stable=*/true, 0, /*descending=*/true));
  const int64_t n = boxes.size(0);
  std::vector<uint8_t> suppressed(n, 0);
  AT_DISPATCH_FLOATING_TYPES(boxes.scalar_type(), "mrcnn_nms_cpu", [&] {
    SortedBoxes<scalar_t> sorted(n);
    GatherSorted(boxes, order.data_ptr<int64_t>(), n, sorted);
    SuppressSorted(sorted.x1.data(), sorted.y1.data(), sorted.x2.data(), sorted.y2.data(),
                   sorted.areas.data(), n, StrictThreshold<scalar_t>(iou_threshold),
                   suppressed.data());
  });
  return KeptIndices(suppressed, order.data_ptr<int64_t>());
}

at::Tensor NmsCpu(const at::Tensor& dets, const at::Tensor& scores, double iou_threshold) {
  CheckNmsInputs(dets, scores, "mrcnn::nms");
  if (dets.size(0) == 0) {
    return at::empty({0}, dets.options().dtype(at::kLong));
  }
  return NmsKeep(dets.contiguous(), scores, iou_threshold);
}

// True when every coordinate of each run (class) of the class-sorted boxes lies on one
// side of every coordinate of each other run: then boxes of different classes have an
// empty intersection, so their IoU is +-0 or NaN and never exceeds a threshold >= 0.
// NaN coordinates answer false.
template <typename T>
bool RunsSeparated(const SortedBoxes<T>& sorted, const std::vector<int64_t>& run_start) {
  const size_t runs = run_start.size() - 1;
  std::vector<std::pair<T, T>> ranges(runs);
  for (size_t r = 0; r < runs; ++r) {
    T lo = std::numeric_limits<T>::infinity(), hi = -std::numeric_limits<T>::infinity();
    for (int64_t k = run_start[r]; k < run_start[r + 1]; ++k) {
      for (const T v : {sorted.x1[k], sorted.y1[k], sorted.x2[k], sorted.y2[k]}) {
        if (std::isnan(v)) {
          return false;
        }
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
    }
    ranges[r] = {lo, hi};
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t r = 1; r < runs; ++r) {
    if (!(ranges[r - 1].second <= ranges[r].first)) {
      return false;
    }
  }
  return true;
}

// torchvision.ops.batched_nms. Up to kBatchedNmsPerClassAbove boxes torchvision runs NMS
// on coordinate-trick boxes; IoUs are taken on those boxes here too, one class at a
// time when the shifted classes cannot interact (the usual case), else over all boxes
// at once, exactly as torchvision (negative thresholds, negative coordinates,
// fractional or NaN idxs, non-finite boxes). Above that it runs NMS per distinct idx
// value on the boxes as given, as torchvision does, dropping boxes whose idx is NaN
// (torchvision's per-class loop never selects them).
at::Tensor BatchedNmsCpu(const at::Tensor& dets, const at::Tensor& scores, const at::Tensor& idxs,
                         double iou_threshold) {
  const char* op = "mrcnn::batched_nms";
  CheckNmsInputs(dets, scores, op);
  CheckIdxs(idxs, dets, op);
  if (dets.size(0) == 0) {
    return at::empty({0}, dets.options().dtype(at::kLong));
  }
  const int64_t n = dets.size(0);
  const bool coordinate_trick = n <= kBatchedNmsPerClassAbove;
  const at::Tensor boxes =
      (coordinate_trick ? CoordinateTrickBoxes(dets, idxs) : dets).contiguous();
  // Score order first, then a stable sort by class: each class becomes a contiguous
  // run that is still in decreasing-score order.
  const at::Tensor order = std::get<1>(scores.sort(/*stable=*/true, 0, /*descending=*/true));
  const at::Tensor classes_in_order = ClassKeys(idxs).index_select(0, order);
  const at::Tensor by_class = std::get<1>(classes_in_order.sort(/*stable=*/true, 0, false));
  const at::Tensor class_order = order.index_select(0, by_class).contiguous();
  const at::Tensor sorted_classes = classes_in_order.index_select(0, by_class).contiguous();
  const int64_t* cls = sorted_classes.data_ptr<int64_t>();
  std::vector<int64_t> run_start{0};
  for (int64_t k = 1; k < n; ++k) {
    if (cls[k] != cls[k - 1]) {
      run_start.push_back(k);
    }
  }
  run_start.push_back(n);
  const int64_t runs = static_cast<int64_t>(run_start.size()) - 1;

  std::vector<uint8_t> suppressed(n, 0);
  bool per_class = true;
  AT_DISPATCH_FLOATING_TYPES(boxes.scalar_type(), "mrcnn_nms_cpu", [&] {
    SortedBoxes<scalar_t> sorted(n);
    GatherSorted(boxes, class_order.data_ptr<int64_t>(), n, sorted);
    if (coordinate_trick && (iou_threshold < 0 || !RunsSeparated(sorted, run_start))) {
      per_class = false;
      return;
    }
    const scalar_t threshold = StrictThreshold<scalar_t>(iou_threshold);
    at::parallel_for(0, runs, 1, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const int64_t s = run_start[r];
        SuppressSorted(sorted.x1.data() + s, sorted.y1.data() + s, sorted.x2.data() + s,
                       sorted.y2.data() + s, sorted.areas.data() + s, run_start[r + 1] - s,
                       threshold, suppressed.data() + s);
      }
    });
  });
  if (!per_class) {
    return NmsKeep(boxes, scores, iou_threshold);
  }
  if (!coordinate_trick && idxs.is_floating_point()) {
    const at::Tensor nan_in_class_order =
        at::isnan(idxs).index_select(0, class_order).to(at::kByte).contiguous();
    const uint8_t* nan = nan_in_class_order.data_ptr<uint8_t>();
    for (int64_t k = 0; k < n; ++k) {
      suppressed[k] |= nan[k];
    }
  }
  // Survivors back in global score order: mark them by score rank and walk the ranks.
  std::vector<uint8_t> kept_by_rank(n, 0);
  const int64_t* by_class_ptr = by_class.data_ptr<int64_t>();
  for (int64_t k = 0; k < n; ++k) {
    kept_by_rank[by_class_ptr[k]] = static_cast<uint8_t>(!suppressed[k]);
  }
  std::vector<uint8_t> suppressed_by_rank(n);
  for (int64_t k = 0; k < n; ++k) {
    suppressed_by_rank[k] = static_cast<uint8_t>(!kept_by_rank[k]);
  }
  const at::Tensor keep = KeptIndices(suppressed_by_rank, order.data_ptr<int64_t>());
  if (!coordinate_trick) {
    // torchvision's per-class algorithm orders its survivors with ATen's default
    // (unstable) descending sort of their scores taken in index order; equal scores
    // follow that sort's order.
    const at::Tensor by_index = std::get<0>(keep.sort(0, false));
    return by_index.index_select(0, std::get<1>(scores.index_select(0, by_index).sort(0, true)));
  }
  return keep;
}

at::Tensor BatchedNmsKeepMaskCpu(const at::Tensor& dets, const at::Tensor& scores,
                                 const at::Tensor& idxs, double iou_threshold) {
  const at::Tensor keep = BatchedNmsCpu(dets, scores, idxs, iou_threshold);
  return at::zeros({dets.size(0)}, dets.options().dtype(at::kBool)).index_fill_(0, keep, true);
}

// Per image and group, greedy NMS over the group's usable boxes in score order (stable: ties
// keep the lower column first), as the CUDA kernel; (image, group) pairs run in parallel.
at::Tensor NmsKeepMaskGroupedCpu(const at::Tensor& dets, const at::Tensor& scores,
                                 const at::Tensor& usable, c10::IntArrayRef group_sizes,
                                 double iou_threshold) {
  const char* op = "mrcnn::nms_keep_mask_grouped";
  CheckGroupedNmsInputs(dets, scores, usable, group_sizes, op);
  const int64_t images = dets.size(0), groups = static_cast<int64_t>(group_sizes.size());
  at::Tensor keep = at::zeros(scores.sizes(), dets.options().dtype(at::kBool));
  std::vector<int64_t> starts(group_sizes.size(), 0);
  for (size_t g = 1; g < starts.size(); ++g) {
    starts[g] = starts[g - 1] + group_sizes[g - 1];
  }
  const at::Tensor boxes = dets.contiguous();
  at::parallel_for(0, images * groups, 1, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t image = task / groups, group = task % groups;
      const int64_t start = starts[static_cast<size_t>(group)];
      const at::Tensor columns =
          usable[image].narrow(0, start, group_sizes[group]).nonzero().squeeze(1) + start;
      if (columns.size(0) == 0) {
        continue;
      }
      const at::Tensor kept = NmsKeep(boxes[image].index_select(0, columns),
                                      scores[image].index_select(0, columns), iou_threshold);
      keep[image].index_fill_(0, columns.index_select(0, kept), true);
    }
  });
  return keep;
}

}  // namespace

TORCH_LIBRARY_IMPL(mrcnn, CPU, m) {
  m.impl("nms", &NmsCpu);
  m.impl("batched_nms", &BatchedNmsCpu);
  m.impl("batched_nms_keep_mask", &BatchedNmsKeepMaskCpu);
  m.impl("nms_keep_mask_grouped", &NmsKeepMaskGroupedCpu);
}

}  // namespace mrcnn::kernels
