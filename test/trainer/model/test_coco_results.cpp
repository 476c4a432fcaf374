// trainer predict's COCO results entries (model::CocoResult) from hand-made detections: the
// members pycocotools' loadRes reads, keypoints flat as Detectron2's COCO json writer writes
// them, and nothing for what a detection does not have.
#include <catch2/catch.hpp>
#include <vector>

#include "trainer/data/mask_rle.h"
#include "trainer/model/inference/coco_results.h"

using mrcnn::model::CocoResult;
using mrcnn::model::Detection;
using nlohmann::json;

namespace {

Detection BoxOnly() {
  Detection d;
  d.box = {10.0f, 20.0f, 14.5f, 30.0f};
  d.label = 2;
  d.category_id = 7;
  d.score = 0.75f;
  return d;
}

}  // namespace

TEST_CASE("a COCO result of a box-only detection has no segmentation and no keypoints",
          "[coco_results]") {
  const json r = CocoResult(BoxOnly(), 42, 64, 96);
  CHECK(r.dump() == R"({"bbox":[10.0,20.0,4.5,10.0],"category_id":7,"image_id":42,"score":0.75})");
}

TEST_CASE("a COCO result's keypoints: x, y, score per keypoint in one flat list",
          "[coco_results][keypoints]") {
  Detection d = BoxOnly();
  d.keypoints = {{11.5f, 20.25f, 0.875f}, {0.0f, 0.0f, 0.03125f}, {13.0f, 29.5f, 1.0f}};
  const json r = CocoResult(d, 3, 64, 96);
  // Detection::keypoints already holds COCO's pixel indices: written as they are.
  CHECK(r.at("keypoints") ==
        json::parse("[11.5, 20.25, 0.875, 0.0, 0.0, 0.03125, 13.0, 29.5, 1.0]"));
  CHECK(r.at("bbox") == json::parse("[10.0, 20.0, 4.5, 10.0]"));
  CHECK(r.at("image_id") == 3);
  CHECK_FALSE(r.contains("segmentation"));
}

TEST_CASE("a COCO result's segmentation: the full image's RLE from a region mask or as encoded",
          "[coco_results]") {
  constexpr int64_t kHeight = 6, kWidth = 5;
  Detection d = BoxOnly();
  d.mask_region = {1, 2, 3, 2};  // x, y, width, height
  d.mask = {1, 1, 0,             // row 2: columns 1, 2
            0, 1, 1};            // row 3: columns 2, 3
  d.keypoints = {{2.0f, 2.0f, 0.5f}};
  const json r = CocoResult(d, 1, kHeight, kWidth);
  REQUIRE(r.contains("segmentation"));
  CHECK(r["segmentation"]["size"] == json::parse("[6, 5]"));
  const auto bits = mrcnn::data::DecodeMask(
      mrcnn::data::RleFromString(r["segmentation"]["counts"].get<std::string>(), kHeight, kWidth));
  std::vector<uint8_t> expected(kHeight * kWidth, 0);  // row-major
  for (const auto& [y, x] : {std::pair{2, 1}, {2, 2}, {3, 2}, {3, 3}})
    expected[static_cast<size_t>(y * kWidth + x)] = 1;
  CHECK(bits == expected);
  CHECK(r["keypoints"] == json::parse("[2.0, 2.0, 0.5]"));

  // A mask encoded where the model ran (Detection::mask_rle) is written as it is.
  Detection encoded = BoxOnly();
  encoded.mask_rle = mrcnn::data::EncodeMaskRegion(d.mask.data(), d.mask_region, kHeight, kWidth);
  CHECK(CocoResult(encoded, 1, kHeight, kWidth)["segmentation"] == r["segmentation"]);
  CHECK_FALSE(CocoResult(encoded, 1, kHeight, kWidth).contains("keypoints"));
}
