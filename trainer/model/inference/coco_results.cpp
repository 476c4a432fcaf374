#include "trainer/model/inference/coco_results.h"

#include "trainer/data/mask_rle.h"

namespace mrcnn::model {

nlohmann::json CocoResult(const Detection& d, int64_t image_id, int64_t height, int64_t width) {
  nlohmann::json r;
  r["image_id"] = image_id;
  r["category_id"] = d.category_id;
  r["bbox"] = {d.box[0], d.box[1], d.box[2] - d.box[0], d.box[3] - d.box[1]};
  r["score"] = d.score;
  if (!d.mask_rle.counts.empty()) {
    r["segmentation"] = {{"size", {height, width}},
                         {"counts", data::RleCountsToString(d.mask_rle)}};
  } else if (!d.mask.empty()) {
    const data::Rle rle = data::EncodeMaskRegion(d.mask.data(), d.mask_region, height, width);
    r["segmentation"] = {{"size", {height, width}}, {"counts", data::RleCountsToString(rle)}};
  }
  if (!d.keypoints.empty()) {
    // COCO's keypoint results: x, y, score per keypoint in one flat list (Detectron2's writer).
    nlohmann::json points = nlohmann::json::array();
    for (const auto& p : d.keypoints)
      points.insert(points.end(), {p[0], p[1], p[2]});
    r["keypoints"] = std::move(points);
  }
  return r;
}

}  // namespace mrcnn::model
