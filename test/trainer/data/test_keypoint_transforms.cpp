// Keypoints through the training transforms, held to Detectron2's dataset mapper
// (load_coco_json's +0.5, transform_keypoint_annotations) and to the left/right flip pairs.
#include <torch/torch.h>

#include <catch2/catch.hpp>

#include "trainer/data/batch.h"
#include "trainer/data/keypoint_flip.h"
#include "trainer/data/random_crop.h"
#include "trainer/data/transforms.h"

using namespace mrcnn::data;

TEST_CASE("flip indices pair left and right names", "[keypoints]") {
  const std::vector<std::string> coco = {"nose", "left_eye", "right_eye", "left_ear", "right_ear"};
  CHECK(KeypointFlipIndices(coco) == std::vector<int64_t>{0, 2, 1, 4, 3});
  const std::vector<std::string> shapes = {"left_top", "right_top", "right_bottom", "left_bottom"};
  CHECK(KeypointFlipIndices(shapes) == std::vector<int64_t>{1, 0, 3, 2});
  // A name whose mirror is absent stays where it is.
  CHECK(KeypointFlipIndices({"left_hand", "tail"}) == std::vector<int64_t>{0, 1});
  CHECK_THROWS_WITH(KeypointFlipIndices({"a", "a"}), Catch::Contains("appears twice"));
}

TEST_CASE("the dataset's keypoint names are one set", "[keypoints]") {
  CocoCategory plain{1, "box", "", {}, {}};
  CocoCategory person{2, "person", "", {"left_eye", "right_eye"}, {{1, 2}}};
  CHECK(DatasetKeypointNames({plain}).empty());
  CHECK(DatasetKeypointNames({plain, person}) == person.keypoints);
  CocoCategory other = person;
  other.id = 3;
  other.keypoints = {"a", "b"};
  CHECK_THROWS_WITH(DatasetKeypointNames({person, other}), Catch::Contains("different"));
}

namespace {

CocoAnnotation Annotated(std::vector<float> keypoints) {
  CocoAnnotation a;
  a.bbox = {10, 20, 40, 30};
  a.label = 1;
  a.keypoints = std::move(keypoints);
  return a;
}

}  // namespace

TEST_CASE("keypoints are resized, flipped with their pairs and zeroed outside", "[keypoints]") {
  const cv::Mat rgb(80, 100, CV_8UC3, cv::Scalar(0, 0, 0));
  const CocoImage image{1, "x.png", 100, 80};
  // left_top visible, right_top labelled but hidden, right_bottom unlabelled (with junk
  // coordinates, which must not leak), left_bottom at x = 99 (inside before the +0.5).
  const std::vector<CocoAnnotation> annotations = {
      Annotated({10, 20, 2, 50, 20, 1, 7, 7, 0, 99, 49, 2}), Annotated({})};
  TransformSpec spec;
  spec.min_sizes = {160};  // x2
  spec.max_size = 1000;
  spec.training = true;
  spec.with_masks = false;
  spec.keypoint_flip =
      KeypointFlipIndices({"left_top", "right_top", "right_bottom", "left_bottom"});
  for (const double flip : {0.0, 1.0}) {
    INFO("flip " << flip);
    spec.flip_probability = flip;
    std::mt19937_64 rng(3);
    const InstanceSample s = TransformInstances(rgb, image, annotations, spec, rng);
    REQUIRE(s.keypoints.size() == 2);
    REQUIRE(s.keypoints[0].size() == 4);
    const float w = 200.0f;
    auto x = [&](float original) {
      return flip == 1.0 ? w - 2 * (original + 0.5f) : 2 * (original + 0.5f);
    };
    // Without a flip: the points in order; with one, left_top and right_top trade places.
    const auto& p = s.keypoints[0];
    const size_t lt = flip == 1.0 ? 1 : 0, rt = flip == 1.0 ? 0 : 1;
    const size_t rb = flip == 1.0 ? 3 : 2, lb = flip == 1.0 ? 2 : 3;
    CHECK(p[lt][0] == Approx(x(10)));
    CHECK(p[lt][1] == Approx(41));
    CHECK(p[lt][2] == 2);
    CHECK(p[rt][0] == Approx(x(50)));
    CHECK(p[rt][2] == 1);
    CHECK(p[rb] == std::array<float, 3>{0, 0, 0});
    CHECK(p[lb][0] == Approx(x(99)));
    CHECK(p[lb][1] == Approx(99));
    CHECK(p[lb][2] == 2);
    // An instance without keypoints in a keypoint dataset: all unlabelled.
    for (const auto& point : s.keypoints[1])
      CHECK(point == std::array<float, 3>{0, 0, 0});
    const Batch batch = CollateBatch({s}, Normalization{});
    REQUIRE(batch.targets[0].keypoints.sizes() == torch::IntArrayRef({2, 4, 3}));
    CHECK(batch.targets[0].keypoints[0][static_cast<int64_t>(lb)][0].item<float>() ==
          Approx(x(99)));
  }
  // A point beyond the image's right edge (x + 0.5 > width) becomes unlabelled.
  std::mt19937_64 rng(3);
  spec.flip_probability = 0;
  const InstanceSample outside = TransformInstances(
      rgb, image, std::vector<CocoAnnotation>{Annotated({100, 10, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0})},
      spec, rng);
  CHECK(outside.keypoints[0][0] == std::array<float, 3>{0, 0, 0});
}

TEST_CASE("a crop moves keypoints with the window", "[keypoints]") {
  const CocoAnnotation a = Annotated({15, 25, 2, 45, 45, 2});
  const MaskRegion window{5, 10, 60, 50};
  const auto cropped = CropAnnotations(std::vector<CocoAnnotation>{a}, window, 80, 100, 0.0);
  REQUIRE(cropped.size() == 1);
  CHECK(cropped[0].keypoints == std::vector<float>{10, 15, 2, 40, 35, 2});
}

TEST_CASE("images without keypoints collate without a keypoint tensor", "[keypoints]") {
  const cv::Mat rgb(40, 40, CV_8UC3, cv::Scalar(0, 0, 0));
  CocoAnnotation a;
  a.bbox = {1, 1, 10, 10};
  a.label = 1;
  TransformSpec spec;
  spec.min_sizes = {40};
  std::mt19937_64 rng(1);
  const InstanceSample s = TransformInstances(rgb, CocoImage{1, "y.png", 40, 40},
                                              std::vector<CocoAnnotation>{a}, spec, rng);
  CHECK(s.keypoints.empty());
  CHECK_FALSE(CollateBatch({s}, Normalization{}).targets[0].keypoints.defined());
}
