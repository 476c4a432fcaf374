#pragma once
// COCO detection evaluation (box, mask and keypoint AP/AR), numerically equivalent to pycocotools'
// COCOeval (evaluate + accumulate + summarize, default parameters) including its quirks:
// crowd regions (IoU over the detection's area, matchable many times), the ignore flag of
// ground truth outside the area range, stable score ordering, maxDets truncation per image,
// and results loaded like COCO.loadRes (ids 1..N in order; when the first result has a
// "bbox", every area is the box area, also for segm). Torch-free and OpenCV-free.
#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "trainer/data/coco_dataset.h"

namespace mrcnn::eval {

// kKeypoints: object keypoint similarity (OKS) instead of IoU, pycocotools' computeOks, with
// its parameters (CocoEvalParams::ForKeypoints) and its 10 summary numbers.
enum class IouType { kBbox, kSegm, kKeypoints };
IouType ParseIouType(std::string_view text);  // "bbox" | "segm" | "keypoints"; throws otherwise
const char* IouTypeName(IouType type);

// One detection, as in a COCO results file.
struct Detection {
  int64_t image_id = 0;
  int64_t category_id = 0;
  double score = 0;
  std::optional<std::array<double, 4>> bbox;  // [x, y, w, h]
  data::CocoSegmentation segmentation;        // usually an Rle
  std::vector<double> keypoints;              // x, y, score per keypoint (keypoint results)
};

struct CocoEvalParams {
  std::vector<double> iou_thresholds;     // default .50:.05:.95 (at most 64)
  std::vector<double> recall_thresholds;  // default 0:.01:1
  std::vector<int64_t> max_dets{1, 10, 100};
  // [min, max] areas, inclusive, with their labels; default all/small/medium/large.
  std::vector<std::array<double, 2>> area_ranges;
  std::vector<std::string> area_labels;
  int num_threads = 0;  // 0 = hardware concurrency
  // OKS sigmas, one per keypoint (keypoints only); empty: COCO's 17 person sigmas. Throws at
  // evaluation when a keypoint annotation or result has another count.
  std::vector<double> kpt_oks_sigmas;
  CocoEvalParams();
  // pycocotools' setKpParams: maxDets [20], areas all/medium/large.
  static CocoEvalParams ForKeypoints(std::vector<double> sigmas = {});
  static CocoEvalParams For(IouType type) {
    return type == IouType::kKeypoints ? ForKeypoints() : CocoEvalParams();
  }
};

// COCO's 17 person keypoint sigmas (pycocotools' kpt_oks_sigmas).
const std::vector<double>& CocoPersonOksSigmas();

struct CategoryAp {
  int64_t category_id = 0;
  std::string name;
  double ap = -1;  // AP@[.5:.95], all areas, maxDets[-1]; -1 when the category has no GT
};

struct CocoEvalResult {
  // AP, AP50, AP75, APs, APm, APl, AR1, AR10, AR100, ARs, ARm, ARl; -1 when undefined. For
  // keypoints the same slots where they apply (AR100 holds AR at maxDets 20; APs, AR1,
  // AR10 and ARs are -1), so AP-reading consumers treat all types alike.
  std::array<double, 12> stats{};
  // pycocotools' stats vector as summarize() leaves it: 12 numbers for bbox/segm (== stats),
  // 10 for keypoints (AP, AP50, AP75, APm, APl, AR, AR50, AR75, ARm, ARl).
  std::vector<double> summary;
  std::vector<CategoryAp> per_category;
  static const std::array<const char*, 12> kStatNames;
  static const std::array<const char*, 10> kKeypointStatNames;
};

// Reads a COCO results file (a JSON array). Throws naming the file and the item when an
// entry is malformed or names an image that is not in the ground truth.
std::vector<Detection> LoadResults(const std::filesystem::path& path,
                                   const data::CocoDataset& ground_truth);
std::vector<Detection> ParseResults(std::string_view json_text, const std::string& source,
                                    const data::CocoDataset& ground_truth);

// Ground truth must be loaded with validate_annotations = false to match pycocotools on
// files it would accept as they are.
CocoEvalResult EvaluateCoco(const data::CocoDataset& ground_truth,
                            const std::vector<Detection>& detections, IouType iou_type,
                            const CocoEvalParams& params = {});

// Ground-truth loading options for evaluation (keeps the file as written).
data::CocoLoadOptions GroundTruthLoadOptions();

// The 12 numbers as pycocotools prints them ("Average Precision (AP) @[ IoU=...").
std::string FormatStatsTable(const CocoEvalResult& result, IouType iou_type);
// {"iou_type": "...", "stats": {"AP": .., ...}, "per_category": [...]}
std::string StatsToJson(const CocoEvalResult& result, IouType iou_type, bool per_category);

}  // namespace mrcnn::eval
