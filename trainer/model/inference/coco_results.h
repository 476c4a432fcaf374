#pragma once
// Detections as COCO results entries, the file `trainer predict` writes and pycocotools'
// loadRes / `trainer evaluate` read, laid out as Detectron2's COCO json writer lays them out.
#include <cstdint>
#include <nlohmann/json.hpp>

#include "trainer/model/inference/inference.h"

namespace mrcnn::model {

// One detection of `image_id` (an image of height x width pixels): image_id, category_id,
// bbox [x, y, w, h], score; "segmentation" (RLE, counts as a string) when the detection has
// a mask (Detection::mask_rle, or mask and mask_region encoded here); "keypoints" [x, y,
// score, ...] flat, K triples, when it has keypoints (x, y already COCO's pixel indices in
// Detection::keypoints). Members the detection has no data for are left out.
nlohmann::json CocoResult(const Detection& d, int64_t image_id, int64_t height, int64_t width);

}  // namespace mrcnn::model
