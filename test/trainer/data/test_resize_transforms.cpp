// The training/evaluation resize under both conventions: Detectron2's output sizes, the
// training size draws (choice and range), Pillow's filter through TransformInstances, and an
// image already at its size left as it is.
#include <catch2/catch.hpp>
#include <opencv2/imgproc.hpp>
#include <random>
#include <set>

#include "trainer/data/pil_bilinear_resize.h"
#include "trainer/data/resize_shortest_edge.h"
#include "trainer/data/transforms.h"

using namespace mrcnn::data;

namespace {

cv::Mat NoiseRgb(int rows, int cols, uint64_t seed) {
  cv::Mat rgb(rows, cols, CV_8UC3);
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i < rgb.total() * 3; ++i)
    rgb.data[i] = static_cast<uint8_t>(rng() >> 56);
  return rgb;
}

}  // namespace

TEST_CASE("shortest-edge sizes are Detectron2's get_output_shape", "[transforms][resize]") {
  // Values computed with detectron2.data.transforms.ResizeShortestEdge.get_output_shape.
  CHECK(ResizedSize(480, 640, 800, 1333) == std::array<int64_t, 2>{800, 1067});
  CHECK(ResizedSize(1080, 1920, 800, 1333) == std::array<int64_t, 2>{750, 1333});
  CHECK(ResizedSize(427, 320, 800, 1333) == std::array<int64_t, 2>{1068, 800});
  CHECK(ResizedSize(320, 427, 320, 1333) == std::array<int64_t, 2>{320, 427});
  CHECK(ResizedSize(100, 5000, 800, 1333) == std::array<int64_t, 2>{27, 1333});
  CHECK(ResizedSize(3, 4, 1, 1333) == std::array<int64_t, 2>{1, 1});
}

TEST_CASE("training sizes are drawn by choice or from a range, tests use the last",
          "[transforms][resize]") {
  TransformSpec spec;
  spec.training = true;
  spec.min_sizes = {640, 672, 800};
  std::mt19937_64 rng(5);
  std::set<int64_t> chosen;
  for (int i = 0; i < 200; ++i)
    chosen.insert(DrawMinSize(spec, rng));
  CHECK(chosen == std::set<int64_t>{640, 672, 800});
  spec.sampling = SizeSampling::kRange;
  spec.min_sizes = {640, 648};
  std::set<int64_t> ranged;
  for (int i = 0; i < 500; ++i)
    ranged.insert(DrawMinSize(spec, rng));
  CHECK(ranged == std::set<int64_t>{640, 641, 642, 643, 644, 645, 646, 647, 648});
  spec.training = false;
  CHECK(DrawMinSize(spec, rng) == 648);
  // A range needs its two bounds.
  spec.training = true;
  spec.min_sizes = {640, 672, 800};
  cv::Mat rgb(10, 10, CV_8UC3, cv::Scalar(0, 0, 0));
  CHECK_THROWS_WITH(TransformInstances(rgb, CocoImage{1, "x.png", 10, 10}, {}, spec, rng),
                    Catch::Contains("min_sizes = {low, high}"));
}

TEST_CASE("Pillow's filter resizes the training image once, boxes scaled with it",
          "[transforms][resize]") {
  const cv::Mat rgb = NoiseRgb(90, 130, 11);
  const CocoImage image{1, "x.png", 130, 90};
  CocoAnnotation box;
  box.bbox = {10, 20, 40, 30};
  box.label = 1;
  TransformSpec spec;
  spec.training = true;
  spec.filter = ResizeFilter::kPilBilinear;
  spec.with_masks = false;
  for (int64_t size : {45, 90, 200}) {
    INFO("shortest edge " << size);
    spec.min_sizes = {size};
    std::mt19937_64 rng(1);
    const InstanceSample s = TransformInstances(rgb, image, {&box, 1}, spec, rng);
    const auto [h, w] = ResizedSize(90, 130, size, spec.max_size);
    REQUIRE(s.image.rows == h);
    REQUIRE(s.image.cols == w);
    cv::Mat want(static_cast<int>(h), static_cast<int>(w), CV_8UC3);
    ResizeBilinearLikePil({rgb.data, 90, 130, 3, 130 * 3}, {want.data, h, w, 3, w * 3});
    CHECK(cv::norm(s.image, want, cv::NORM_INF) == 0);
    CHECK(s.boxes[0][2] == Approx(50.0 * static_cast<double>(w) / 130.0));
    CHECK(s.boxes[0][3] == Approx(50.0 * static_cast<double>(h) / 90.0));
    if (size == 90)  // already at its size: the pixels as they were, in a copy of their own
      CHECK((s.image.data != rgb.data && cv::norm(s.image, rgb, cv::NORM_INF) == 0));
  }
  // OpenCV's filter (torchvision's convention) differs from Pillow's when shrinking: Pillow
  // averages every covered pixel.
  spec.min_sizes = {30};
  std::mt19937_64 rng(1);
  const cv::Mat pil = TransformInstances(rgb, image, {}, spec, rng).image;
  spec.filter = ResizeFilter::kOpenCvBilinear;
  const cv::Mat opencv = TransformInstances(rgb, image, {}, spec, rng).image;
  cv::Mat want;
  cv::resize(rgb, want, opencv.size(), 0, 0, cv::INTER_LINEAR);
  CHECK(cv::norm(opencv, want, cv::NORM_INF) == 0);
  CHECK(cv::norm(opencv, pil, cv::NORM_INF) > 10);
}
