#pragma once
// COCO detection evaluation (box and mask AP/AR), numerically equivalent to pycocotools'
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

enum class IouType { kBbox, kSegm };
IouType ParseIouType(std::string_view text);  // "bbox" | "segm"; throws otherwise
const char* IouTypeName(IouType type);

// One detection, as in a COCO results file.
struct Detection {
  int64_t image_id = 0;
  int64_t category_id = 0;
  double score = 0;
  std::optional<std::array<double, 4>> bbox;  // [x, y, w, h]
  data::CocoSegmentation segmentation;        // usually an Rle
};

struct CocoEvalParams {
  std::vector<double> iou_thresholds;     // default .50:.05:.95 (at most 64)
  std::vector<double> recall_thresholds;  // default 0:.01:1
  std::vector<int64_t> max_dets{1, 10, 100};
  // [min, max] areas, inclusive, with their labels; default all/small/medium/large.
  std::vector<std::array<double, 2>> area_ranges;
  std::vector<std::string> area_labels;
  int num_threads = 0;  // 0 = hardware concurrency
  CocoEvalParams();
};

struct CategoryAp {
  int64_t category_id = 0;
  std::string name;
  double ap = -1;  // AP@[.5:.95], all areas, maxDets[-1]; -1 when the category has no GT
};

struct CocoEvalResult {
  // AP, AP50, AP75, APs, APm, APl, AR1, AR10, AR100, ARs, ARm, ARl; -1 when undefined.
  std::array<double, 12> stats{};
  std::vector<CategoryAp> per_category;
  static const std::array<const char*, 12> kStatNames;
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
