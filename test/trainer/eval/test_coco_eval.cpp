// Unit tests of trainer/eval on cases whose numbers follow from COCO's definitions by hand;
// test/oracle/eval compares every number with pycocotools on random cases.
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "trainer/eval/coco_eval.h"

using namespace mrcnn;
using Catch::Matchers::Contains;

namespace {

// Three large squares (100x100, area 10000 > 96^2, as boxes and polygons) per category on
// each image.
std::string GroundTruth(int images, int categories) {
  std::string image_list, annotation_list, category_list;
  int id = 0;
  for (int i = 1; i <= images; ++i) {
    image_list += std::string(i > 1 ? "," : "") + R"({"id": )" + std::to_string(i) +
                  R"(, "file_name": "x.png", "width": 400, "height": 400})";
    for (int c = 1; c <= categories; ++c) {
      for (int k = 0; k < 3; ++k) {
        const int x = k * 120 + c;
        const std::string left = std::to_string(x), right = std::to_string(x + 100);
        const std::string separator = id > 0 ? "," : "";
        annotation_list += separator + R"({"id": )" + std::to_string(++id) + R"(, "image_id": )" +
                           std::to_string(i) + R"(, "category_id": )" + std::to_string(c) +
                           R"(, "iscrowd": 0, "area": 10000, "bbox": [)" + left +
                           R"(, 10, 100, 100], "segmentation": [[)" + left + ", 10, " + right +
                           ", 10, " + right + ", 110, " + left + ", 110]]}";
      }
    }
  }
  for (int c = 1; c <= categories; ++c) {
    category_list += std::string(c > 1 ? "," : "") + R"({"id": )" + std::to_string(c) +
                     R"(, "name": "c)" + std::to_string(c) + R"("})";
  }
  return R"({"images": [)" + image_list + R"(], "annotations": [)" + annotation_list +
         R"(], "categories": [)" + category_list + "]}";
}

data::CocoDataset Load(const std::string& text) {
  return data::CocoDataset::Parse(text, "gt.json", eval::GroundTruthLoadOptions());
}

eval::Detection Box(int64_t image, int64_t category, double score, double x, double y) {
  eval::Detection d;
  d.image_id = image;
  d.category_id = category;
  d.score = score;
  d.bbox = std::array<double, 4>{x, y, 100, 100};
  return d;
}

}  // namespace

TEST_CASE("detections equal to the ground truth score AP 1 and AR 1", "[eval]") {
  const auto gt = Load(GroundTruth(2, 2));
  std::vector<eval::Detection> dets;
  for (const auto& a : gt.annotations()) {
    dets.push_back(Box(a.image_id, a.category_id, 0.9, a.bbox[0], a.bbox[1]));
  }
  // A false positive below every true one leaves precision at 1 for every recall.
  dets.push_back(Box(1, 1, 0.1, 290, 290));
  const auto result = eval::EvaluateCoco(gt, dets, eval::IouType::kBbox);
  CHECK(result.stats[0] == Approx(1.0));      // AP
  CHECK(result.stats[1] == Approx(1.0));      // AP50
  CHECK(result.stats[3] == -1);               // APs: no small objects
  CHECK(result.stats[5] == Approx(1.0));      // APl
  CHECK(result.stats[8] == Approx(1.0));      // AR100
  CHECK(result.stats[6] == Approx(1.0 / 3));  // AR1: one of three objects per image and class
}

TEST_CASE("a false positive ranked above the only true positive halves AP", "[eval]") {
  const auto gt = Load(
      R"({"images": [{"id": 1, "width": 300, "height": 300}],
          "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "iscrowd": 0, "area": 10000,
                           "bbox": [10, 10, 100, 100]}],
          "categories": [{"id": 1, "name": "a"}]})");
  const std::vector<eval::Detection> dets = {Box(1, 1, 0.9, 190, 190), Box(1, 1, 0.8, 10, 10)};
  const auto result = eval::EvaluateCoco(gt, dets, eval::IouType::kBbox);
  // Precision is 1/2 at recall 1 and the envelope carries it down to recall 0.
  CHECK(result.stats[0] == Approx(0.5));
  CHECK(result.stats[1] == Approx(0.5));
  CHECK(result.stats[2] == Approx(0.5));
  CHECK(result.stats[6] == 0);            // AR1 sees only the false positive
  CHECK(result.stats[8] == Approx(1.0));  // AR100
}

TEST_CASE("evaluation gives the same numbers on one thread and on several", "[eval]") {
  const auto gt = Load(GroundTruth(3, 5));
  std::vector<eval::Detection> dets;
  int n = 0;
  for (const auto& a : gt.annotations()) {
    // Shifted by 0..24 px: IoUs spread over the thresholds; scores all distinct.
    const double shift = (n * 7) % 25;
    dets.push_back(Box(a.image_id, a.category_id, 1.0 - 0.001 * n, a.bbox[0] + shift, a.bbox[1]));
    ++n;
  }
  for (const auto type : {eval::IouType::kBbox, eval::IouType::kSegm}) {
    eval::CocoEvalParams one, several;
    one.num_threads = 1;
    several.num_threads = 4;
    const auto a = eval::EvaluateCoco(gt, dets, type, one);
    const auto b = eval::EvaluateCoco(gt, dets, type, several);
    CHECK(a.stats == b.stats);
    CHECK(a.stats[0] > 0.1);
    CHECK(a.stats[0] < 1.0);
  }
}

TEST_CASE("results for an image outside the ground truth are refused, naming the item", "[eval]") {
  const auto gt = Load(GroundTruth(1, 1));
  CHECK_THROWS_WITH(
      eval::ParseResults(R"([{"image_id": 1, "category_id": 1, "score": 0.5, "bbox": [0, 0, 1, 1]},
                             {"image_id": 9, "category_id": 1, "score": 0.5, "bbox": [0, 0, 1, 1]}])",
                         "res.json", gt),
      Contains("results[1]") && Contains("image_id 9"));
}

namespace {

// One image: a large person-like object with one labelled keypoint of two (area 10000) and a
// medium one without labelled keypoints (num_keypoints 0, ignored by keypoint evaluation).
constexpr const char* kKeypointTruth = R"({"images": [{"id": 1, "width": 400, "height": 400}],
    "annotations": [
      {"id": 1, "image_id": 1, "category_id": 1, "iscrowd": 0, "area": 10000,
       "bbox": [100, 100, 100, 100], "keypoints": [150, 150, 2, 0, 0, 0], "num_keypoints": 1},
      {"id": 2, "image_id": 1, "category_id": 1, "iscrowd": 0, "area": 2500,
       "bbox": [10, 250, 50, 50], "keypoints": [0, 0, 0, 0, 0, 0], "num_keypoints": 0}],
    "categories": [{"id": 1, "name": "p", "keypoints": ["a", "b"], "skeleton": [[1, 2]]}]})";

eval::Detection Keypoints(double score, std::vector<double> points) {
  eval::Detection d;
  d.image_id = 1;
  d.category_id = 1;
  d.score = score;
  d.keypoints = std::move(points);
  return d;
}

}  // namespace

TEST_CASE("keypoint AP follows OKS by hand; ground truth without labelled points is ignored",
          "[eval][keypoints]") {
  const auto gt = Load(kKeypointTruth);
  // OKS over the one labelled point: exp(-d^2 / (2 * area * (2 sigma)^2)) = 0.72 with sigma
  // 0.1, so it matches at the thresholds 0.50..0.70 (5 of 10) and not from 0.75 on.
  const double d = std::sqrt(-std::log(0.72) * 2 * 10000 * 0.04);
  const std::vector<eval::Detection> dets = {
      // Inside the unlabelled object's box grown by its size: OKS 1 with it, so this result
      // is ignored rather than a false positive ranked first (which would halve AP).
      Keypoints(0.95, {30, 270, 0.5, 40, 280, 0.5}),
      Keypoints(0.9, {150 + d, 150, 0.5, 300, 300, 0.5})};
  const auto result = eval::EvaluateCoco(gt, dets, eval::IouType::kKeypoints,
                                         eval::CocoEvalParams::ForKeypoints({0.1, 0.1}));
  REQUIRE(result.summary.size() == 10);
  const std::vector<double> expected = {0.5, 1, 0, -1, 0.5, 0.5, 1, 0, -1, 0.5};
  for (size_t i = 0; i < expected.size(); ++i) {
    INFO(eval::CocoEvalResult::kKeypointStatNames[i]);
    CHECK(result.summary[i] == Approx(expected[i]));
  }
  // The 12-slot view keeps AP/AP50/AP75/APm/APl and AR (maxDets 20) where bbox has them.
  CHECK(result.stats[0] == Approx(0.5));
  CHECK(result.stats[3] == -1);
  CHECK(result.stats[5] == Approx(0.5));
  CHECK(result.stats[8] == Approx(0.5));
  const std::string table = eval::FormatStatsTable(result, eval::IouType::kKeypoints);
  CHECK_THAT(table, Contains("area=medium | maxDets= 20 ] = -1.000"));
  // pycocotools' 10 keypoint names (no APs, AR1, AR10 slots); values as summed there.
  const std::string json = eval::StatsToJson(result, eval::IouType::kKeypoints, false);
  CHECK_THAT(json, Contains(R"("APm": -1.0)") && Contains(R"("ARl": 0.5)") &&
                       Contains(R"("AR75": 0.0)") && Contains("stats_list"));
  CHECK(json.find("APs") == std::string::npos);
  CHECK(json.find("AR100") == std::string::npos);
}

TEST_CASE("keypoint evaluation refuses a keypoint count other than the sigmas'",
          "[eval][keypoints]") {
  const auto gt = Load(kKeypointTruth);
  const std::vector<eval::Detection> dets = {Keypoints(0.9, {150, 150, 1, 160, 160, 1})};
  CHECK_THROWS_WITH(eval::EvaluateCoco(gt, dets, eval::IouType::kKeypoints,
                                       eval::CocoEvalParams::For(eval::IouType::kKeypoints)),
                    Contains("2 keypoints for 17 OKS sigmas") && Contains("--oks-sigmas") &&
                        Contains("TEST.KEYPOINT_OKS_SIGMAS"));
  CHECK_NOTHROW(eval::EvaluateCoco(gt, dets, eval::IouType::kKeypoints,
                                   eval::CocoEvalParams::ForKeypoints({0.05, 0.05})));
}

TEST_CASE("keypoint results are read as x, y, score triples", "[eval][keypoints]") {
  const auto gt = Load(kKeypointTruth);
  const auto dets = eval::ParseResults(
      R"([{"image_id": 1, "category_id": 1, "score": 0.5, "keypoints": [1, 2, 0.25, 3, 4, 0.5]}])",
      "res.json", gt);
  REQUIRE(dets.size() == 1);
  CHECK(dets[0].keypoints == std::vector<double>{1, 2, 0.25, 3, 4, 0.5});
  CHECK_FALSE(dets[0].bbox.has_value());
  CHECK_THROWS_WITH(eval::ParseResults(
                        R"([{"image_id": 1, "category_id": 1, "score": 0.5, "keypoints": [1, 2]}])",
                        "res.json", gt),
                    Contains("results[0]") && Contains("not x, y, score triples"));
  CHECK(eval::ParseIouType("keypoints") == eval::IouType::kKeypoints);
}
