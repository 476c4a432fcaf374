// The training crop (INPUT.CROP, random_crop.h) alone and inside TransformInstances.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <numbers>
#include <opencv2/imgproc.hpp>
#include <set>

#include "trainer/data/random_crop.h"
#include "trainer/data/transforms.h"

using namespace mrcnn::data;

namespace {

CropSpec Absolute(int64_t height, int64_t width, double min_area_fraction = 0.3) {
  CropSpec c;
  c.enabled = true;
  c.type = CropType::kAbsolute;
  c.size = {static_cast<double>(height), static_cast<double>(width)};
  c.min_area_fraction = min_area_fraction;
  return c;
}

// Training at native resolution: a shortest edge equal to the crop's, no flip.
TransformSpec NativeTraining(const CropSpec& crop) {
  TransformSpec spec;
  spec.training = true;
  spec.min_sizes = {static_cast<int64_t>(std::min(crop.size[0], crop.size[1]))};
  spec.max_size = 100000;
  spec.crop = crop;
  return spec;
}

CocoAnnotation BoxOnly(double x, double y, double w, double h, int64_t id = 1) {
  CocoAnnotation a;
  a.id = id;
  a.label = 1;
  a.bbox = {x, y, w, h};
  a.area = w * h;
  return a;
}

CocoAnnotation Polygon(std::vector<double> xy, int64_t id = 1) {
  CocoAnnotation a;
  a.id = id;
  a.label = 1;
  double x0 = 1e9, y0 = 1e9, x1 = -1e9, y1 = -1e9;
  for (size_t i = 0; i + 1 < xy.size(); i += 2) {
    x0 = std::min(x0, xy[i]);
    x1 = std::max(x1, xy[i]);
    y0 = std::min(y0, xy[i + 1]);
    y1 = std::max(y1, xy[i + 1]);
  }
  a.bbox = {x0, y0, x1 - x0, y1 - y0};
  a.segmentation = CocoPolygons{std::move(xy)};
  return a;
}

CocoAnnotation AsRle(const CocoAnnotation& a, int64_t height, int64_t width) {
  CocoAnnotation r = a;
  r.segmentation = RleFromPolygons(std::get<CocoPolygons>(a.segmentation), height, width);
  return r;
}

std::vector<double> Circle(double cx, double cy, double radius) {
  std::vector<double> xy;
  for (int i = 0; i < 32; ++i) {
    const double t = 2 * std::numbers::pi * i / 32;
    xy.push_back(cx + radius * std::cos(t));
    xy.push_back(cy + radius * std::sin(t));
  }
  return xy;
}

cv::Mat Noise(int height, int width, int seed) {
  cv::Mat rgb(height, width, CV_8UC3);
  cv::RNG(seed).fill(rgb, cv::RNG::UNIFORM, 0, 256);
  return rgb;
}

bool SameMat(const cv::Mat& a, const cv::Mat& b) {
  return a.size() == b.size() && a.type() == b.type() && cv::norm(a, b, cv::NORM_INF) == 0;
}

}  // namespace

TEST_CASE("crop sizes follow Detectron2's four types, clipped to the image", "[crop]") {
  std::mt19937_64 rng(5);
  CropSpec c;
  c.type = CropType::kRelative;
  c.size = {0.5, 0.25};
  CHECK(CropSize(301, 400, c, rng) == std::array<int64_t, 2>{151, 100});  // int(v * f + 0.5)
  CHECK(CropSize(800, 1200, Absolute(512, 640), rng) == std::array<int64_t, 2>{512, 640});
  CHECK(CropSize(300, 1200, Absolute(512, 640), rng) == std::array<int64_t, 2>{300, 640});
  std::set<int64_t> heights;
  for (int i = 0; i < 300; ++i) {
    c.type = CropType::kRelativeRange;
    c.size = {0.5, 0.8};
    const auto [rh, rw] = CropSize(1000, 500, c, rng);
    CHECK((rh >= 500 && rh <= 1000));
    CHECK((rw >= 400 && rw <= 500));
    c.type = CropType::kAbsoluteRange;
    c.size = {100, 300};
    const auto [ah, aw] = CropSize(1000, 200, c, rng);
    CHECK((ah >= 100 && ah <= 300));
    CHECK((aw >= 100 && aw <= 200));  // the range's top clipped to the image
    heights.insert(ah);
  }
  CHECK(heights.size() > 50);  // drawn, not fixed
}

TEST_CASE("a crop keeps exactly the pixels of its window, at native resolution", "[crop]") {
  const cv::Mat rgb = Noise(300, 400, 1);
  CocoImage im{1, "x.png", 400, 300};
  const TransformSpec spec = NativeTraining(Absolute(96, 128));
  std::set<std::pair<int64_t, int64_t>> corners;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    std::mt19937_64 rng(seed), replay(seed);
    const InstanceSample s = TransformInstances(rgb, im, {}, spec, rng);
    const MaskRegion w = RandomCropWindow(300, 400, spec.crop, replay);  // the same draws
    REQUIRE(w.width == 128);
    REQUIRE(w.height == 96);
    CHECK((w.x >= 0 && w.x + w.width <= 400 && w.y >= 0 && w.y + w.height <= 300));
    const cv::Mat window = rgb(cv::Rect(w.x, w.y, w.width, w.height));
    CHECK(SameMat(s.image, window));
    CHECK(s.original_height == 96);
    CHECK(s.original_width == 128);
    corners.insert({w.x, w.y});
  }
  CHECK(corners.size() > 10);  // the window moves
}

TEST_CASE("boxes are clipped to the window and moved into its coordinates", "[crop]") {
  const MaskRegion window{50, 40, 100, 80};  // x 50..150, y 40..120
  const std::vector<CocoAnnotation> anns{
      BoxOnly(60, 50, 20, 10, 1),    // inside: only moved
      BoxOnly(30, 60, 40, 30, 2),    // half inside (x 50..70 of 30..70): clipped, kept
      BoxOnly(140, 100, 40, 40, 3),  // 10x20 of 40x40 inside (1/8): dropped
      BoxOnly(0, 0, 20, 20, 4),      // outside: dropped
      BoxOnly(150, 40, 10, 10, 5)};  // touches the right edge only: empty, dropped
  const auto kept = CropAnnotations(anns, window, 200, 300, 0.3);
  REQUIRE(kept.size() == 2);
  CHECK(kept[0].id == 1);
  CHECK(kept[0].bbox == std::array<double, 4>{10, 10, 20, 10});
  CHECK(kept[1].id == 2);
  CHECK(kept[1].bbox == std::array<double, 4>{0, 20, 20, 30});
  // With a lower threshold the one-eighth instance stays, clipped to x 90..100, y 60..80.
  const auto more = CropAnnotations(anns, window, 200, 300, 0.1);
  REQUIRE(more.size() == 3);
  CHECK(more[2].id == 3);
  CHECK(more[2].bbox == std::array<double, 4>{90, 60, 10, 20});
  // Crowd regions stay left out, as the transform leaves them out.
  CocoAnnotation crowd = anns[0];
  crowd.iscrowd = true;
  CHECK(CropAnnotations(std::vector{crowd}, window, 200, 300, 0.3).empty());
}

TEST_CASE(
    "the kept fraction is the mask's where there is one: mostly outside dropped, mostly "
    "inside kept",
    "[crop]") {
  const int64_t H = 200, W = 200;
  // A right triangle with legs of 100 px: its box is half inside the window x >= 50, but a
  // quarter of its area is (the corner beyond x = 50 is a 50 px triangle).
  const CocoAnnotation tri = Polygon({0, 0, 100, 0, 0, 100});
  const MaskRegion window{50, 0, 150, 200};
  CocoAnnotation box_only = tri;
  box_only.segmentation = std::monostate{};
  CHECK(CropAnnotations(std::vector{box_only}, window, H, W, 0.3).size() == 1);  // box: 1/2
  CHECK(CropAnnotations(std::vector{tri}, window, H, W, 0.3).empty());           // mask: ~1/4
  CHECK(CropAnnotations(std::vector{AsRle(tri, H, W)}, window, H, W, 0.3).empty());
  // Kept at a lower threshold, with the box of the visible corner, not the clipped box
  // (which would be 100 px tall).
  for (const CocoAnnotation& a : {tri, AsRle(tri, H, W)}) {
    const auto kept = CropAnnotations(std::vector{a}, window, H, W, 0.2);
    REQUIRE(kept.size() == 1);
    const auto& b = kept[0].bbox;
    CHECK(b[0] == 0);
    CHECK(b[1] == 0);
    CHECK(b[2] == Approx(50).margin(1));
    CHECK(b[3] == Approx(50).margin(1));
  }
  // A circle of radius 30 at x = 60: 71 % of its area lies right of x = 50.
  const CocoAnnotation circle = Polygon(Circle(60, 100, 30));
  for (const CocoAnnotation& a : {circle, AsRle(circle, H, W)}) {
    const auto kept = CropAnnotations(std::vector{a}, window, H, W, 0.65);
    REQUIRE(kept.size() == 1);
    CHECK(kept[0].bbox[0] == 0);
    CHECK(kept[0].bbox[2] == Approx(40).margin(1));
    CHECK(CropAnnotations(std::vector{a}, window, H, W, 0.77).empty());
  }
}

TEST_CASE("cropped masks are the window of the uncropped masks", "[crop]") {
  const int64_t H = 240, W = 320;
  const cv::Mat rgb = Noise(H, W, 2);
  CocoImage im{1, "x.png", W, H};
  std::vector<CocoAnnotation> anns;
  for (int i = 0; i < 12; ++i) {
    anns.push_back(Polygon(Circle(20 + 25.5 * i, 40 + 15.25 * i, 18 + i), i + 1));
    anns.push_back(AsRle(anns.back(), H, W));
  }
  TransformSpec whole = NativeTraining(Absolute(H, W));
  whole.crop.enabled = false;
  std::mt19937_64 unused(0);
  const InstanceSample full = TransformInstances(rgb, im, anns, whole, unused);
  REQUIRE(full.masks.size() == anns.size());
  int64_t compared = 0;
  for (uint64_t seed = 0; seed < 10; ++seed) {
    const TransformSpec spec = NativeTraining(Absolute(100, 150, 0.0));
    std::mt19937_64 rng(seed), replay(seed);
    const InstanceSample s = TransformInstances(rgb, im, anns, spec, rng);
    const MaskRegion w = RandomCropWindow(H, W, spec.crop, replay);
    const cv::Rect r(w.x, w.y, w.width, w.height);
    const auto inside = CropAnnotations(anns, w, H, W, 0.0);
    REQUIRE(s.masks.size() == inside.size());
    for (size_t k = 0; k < inside.size(); ++k) {
      const bool rle = std::holds_alternative<Rle>(inside[k].segmentation);
      const cv::Mat expected = full.masks[static_cast<size_t>(2 * (inside[k].id - 1) + rle)](r);
      cv::Mat diff;
      cv::absdiff(s.masks[k], expected, diff);
      INFO("seed " << seed << " instance " << inside[k].id);
      if (rle) {
        CHECK(cv::countNonZero(diff) == 0);  // cut, never redrawn
      } else {
        // Redrawn in the window's coordinates: at most an edge pixel here and there.
        cv::Mat edge;
        cv::morphologyEx(expected, edge, cv::MORPH_GRADIENT, cv::Mat::ones(3, 3, CV_8U));
        CHECK(cv::countNonZero(diff & ~edge) == 0);
        CHECK(cv::countNonZero(diff) <= 4);
      }
      ++compared;
    }
  }
  CHECK(compared > 20);
}

TEST_CASE("the same seed gives the same crop, another seed another", "[crop]") {
  const cv::Mat rgb = Noise(300, 400, 3);
  CocoImage im{1, "x.png", 400, 300};
  std::vector<CocoAnnotation> anns;
  for (int i = 0; i < 10; ++i)
    anns.push_back(Polygon(Circle(30 + 35 * i, 30 + 25 * i, 20), i + 1));
  TransformSpec spec = NativeTraining(Absolute(128, 128));
  spec.min_sizes = {96, 128, 160};
  spec.flip_probability = 0.5;
  auto run = [&](uint64_t seed) {
    std::mt19937_64 rng(seed);
    return TransformInstances(rgb, im, anns, spec, rng);
  };
  int differing = 0;
  for (uint64_t seed = 0; seed < 8; ++seed) {
    const InstanceSample a = run(seed), b = run(seed), c = run(seed + 100);
    CHECK(SameMat(a.image, b.image));
    CHECK((a.boxes == b.boxes));
    REQUIRE(a.masks.size() == b.masks.size());
    for (size_t k = 0; k < a.masks.size(); ++k)
      CHECK(SameMat(a.masks[k], b.masks[k]));
    differing += !SameMat(a.image, c.image);
  }
  CHECK(differing >= 6);
}

TEST_CASE("an image smaller than the crop is taken whole, not padded", "[crop]") {
  const cv::Mat rgb = Noise(200, 300, 4);
  CocoImage im{1, "x.png", 300, 200};
  const std::vector<CocoAnnotation> anns{Polygon(Circle(40, 100, 30), 1),
                                         BoxOnly(280, 190, 20, 10, 2)};
  TransformSpec crop = NativeTraining(Absolute(1024, 1024));
  crop.min_sizes = {200};
  TransformSpec none = crop;
  none.crop.enabled = false;
  std::mt19937_64 rng(9), other(9);
  CHECK(RandomCropWindow(200, 300, crop.crop, rng) == MaskRegion{0, 0, 300, 200});
  const InstanceSample a = TransformInstances(rgb, im, anns, crop, rng);
  const InstanceSample b = TransformInstances(rgb, im, anns, none, other);
  CHECK(SameMat(a.image, rgb));
  CHECK(SameMat(a.image, b.image));
  CHECK((a.boxes == b.boxes));  // nothing cut: both instances kept as they were
  REQUIRE(a.masks.size() == 2);
  CHECK(SameMat(a.masks[0], b.masks[0]));
}

TEST_CASE("the crop then the resize: boxes and masks stay aligned with the pixels", "[crop]") {
  // A red square x 100..160, y 80..140 on black; crops of 120x120 shown at 240 px.
  cv::Mat rgb(300, 400, CV_8UC3, cv::Scalar(0, 0, 0));
  cv::rectangle(rgb, cv::Rect(100, 80, 60, 60), cv::Scalar(255, 0, 0), cv::FILLED);
  CocoImage im{1, "x.png", 400, 300};
  const std::vector<CocoAnnotation> anns{Polygon({100, 80, 160, 80, 160, 140, 100, 140})};
  TransformSpec spec = NativeTraining(Absolute(120, 120, 0.0));
  spec.min_sizes = {240};
  int seen = 0;
  for (uint64_t seed = 0; seed < 40; ++seed) {
    std::mt19937_64 rng(seed);
    const InstanceSample s = TransformInstances(rgb, im, anns, spec, rng);
    CHECK(s.image.rows == 240);
    CHECK(s.image.cols == 240);
    if (s.boxes.empty())
      continue;
    ++seen;
    const auto& b = s.boxes[0];
    const cv::Rect mb = cv::boundingRect(s.masks[0]);
    CHECK(std::abs(mb.x - b[0]) <= 1.0);
    CHECK(std::abs(mb.y - b[1]) <= 1.0);
    CHECK(std::abs(mb.x + mb.width - b[2]) <= 1.0);
    CHECK(std::abs(mb.y + mb.height - b[3]) <= 1.0);
    cv::Mat red;
    cv::inRange(s.image, cv::Scalar(128, 0, 0), cv::Scalar(255, 127, 127), red);
    cv::Mat diff;
    cv::absdiff(red / 255, s.masks[0], diff);
    CHECK(cv::countNonZero(diff) <= 2 * (mb.width + mb.height) + 4);  // resampled edges only
  }
  CHECK(seen > 5);
}
