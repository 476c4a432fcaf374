#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include "trainer/data/mask_rle.h"

using namespace mrcnn::data;

TEST_CASE("EncodeMask runs are column-major and start with zeros", "[mask_rle]") {
  // 2x3 row-major:  1 0 0
  //                 1 1 0   -> column-major 1,1, 0,1, 0,0
  const uint8_t m[] = {1, 0, 0, 1, 1, 0};
  Rle r = EncodeMask(m, 2, 3);
  CHECK(r.counts == std::vector<uint32_t>{0, 2, 1, 1, 2});
  CHECK(RleArea(r) == 3);
  CHECK(RleToBbox(r) == std::array<double, 4>{0, 0, 2, 2});
  CHECK(DecodeMask(r) == std::vector<uint8_t>(m, m + 6));
}

TEST_CASE("EncodeMaskRegion equals EncodeMask of the full mask with the region pasted",
          "[mask_rle]") {
  std::mt19937 gen(11);
  for (int trial = 0; trial < 400; ++trial) {
    const int64_t h = 1 + gen() % 50, w = 1 + gen() % 50;
    MaskRegion region;
    region.x = gen() % w;
    region.y = gen() % h;
    region.width = gen() % (w - region.x + 1);  // empty regions too
    region.height = gen() % (h - region.y + 1);
    std::vector<uint8_t> bits(static_cast<size_t>(region.width * region.height));
    const int kind = trial % 3;  // noise, all ones (touching every region edge), empty
    for (auto& v : bits)
      v = kind == 0 ? static_cast<uint8_t>(gen() % 2 * (1 + gen() % 3)) : kind == 1 ? 1 : 0;
    std::vector<uint8_t> full(static_cast<size_t>(h * w), 0);
    for (int64_t y = 0; y < region.height; ++y)
      for (int64_t x = 0; x < region.width; ++x)
        full[(region.y + y) * w + region.x + x] = bits[y * region.width + x];
    CAPTURE(trial, h, w, region.x, region.y, region.width, region.height);
    CHECK(EncodeMaskRegion(bits.data(), region, h, w) == EncodeMask(full.data(), h, w));
  }
}

TEST_CASE("EncodeMaskRegion refuses a region outside the image", "[mask_rle]") {
  const uint8_t bits[4] = {1, 1, 1, 1};
  CHECK_THROWS_WITH(EncodeMaskRegion(bits, MaskRegion{9, 0, 2, 2}, 10, 10),
                    Catch::Contains("does not lie within the 10x10 image"));
  CHECK_THROWS_AS(EncodeMaskRegion(bits, MaskRegion{-1, 0, 2, 2}, 10, 10), std::invalid_argument);
  CHECK_THROWS_AS(EncodeMaskRegion(bits, MaskRegion{0, 9, 2, 2}, 10, 10), std::invalid_argument);
}

TEST_CASE("EncodeMask equals a plain column-major scan on sparse and dense masks", "[mask_rle]") {
  // EncodeMask only scans the rectangle holding nonzero pixels; this is the full scan.
  auto reference = [](const std::vector<uint8_t>& mask, int64_t h, int64_t w) {
    std::vector<uint32_t> counts;
    uint8_t current = 0;
    uint32_t run = 0;
    for (int64_t x = 0; x < w; ++x)
      for (int64_t y = 0; y < h; ++y) {
        const uint8_t v = mask[y * w + x] != 0;
        if (v != current) {
          counts.push_back(run);
          run = 0;
          current = v;
        }
        ++run;
      }
    counts.push_back(run);
    return counts;
  };
  std::mt19937 gen(3);
  for (int trial = 0; trial < 300; ++trial) {
    const int64_t h = 1 + gen() % 40, w = 1 + gen() % 40;
    std::vector<uint8_t> mask(h * w, 0);
    const int kind = trial % 4;  // empty, one blob, pixels on the borders, dense noise
    if (kind == 1) {
      const int64_t y0 = gen() % h, x0 = gen() % w;
      const int64_t y1 = y0 + gen() % (h - y0), x1 = x0 + gen() % (w - x0);
      for (int64_t y = y0; y <= y1; ++y)
        for (int64_t x = x0; x <= x1; ++x)
          mask[y * w + x] = gen() % 5 != 0 ? static_cast<uint8_t>(1 + gen() % 255) : 0;
    } else if (kind == 2) {
      mask[gen() % w] = 1;
      mask[(h - 1) * w + gen() % w] = 7;
      mask[(gen() % h) * w] = 1;
      mask[(gen() % h) * w + w - 1] = 255;
    } else if (kind == 3) {
      for (auto& v : mask)
        v = gen() % 2;
    }
    CAPTURE(trial, h, w);
    CHECK(EncodeMask(mask.data(), h, w).counts == reference(mask, h, w));
  }
}

TEST_CASE("counts string round-trips, including large and negative deltas", "[mask_rle]") {
  std::mt19937 gen(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int64_t h = 1 + gen() % 300, w = 1 + gen() % 300;
    std::vector<uint8_t> mask(static_cast<size_t>(h * w));
    const int density = static_cast<int>(gen() % 100);
    for (auto& v : mask)
      v = static_cast<int>(gen() % 100) < density;
    Rle r = EncodeMask(mask.data(), h, w);
    const std::string s = RleCountsToString(r);
    CHECK(RleFromString(s, h, w) == r);
    CHECK(DecodeMask(r) == mask);
  }
}

TEST_CASE("malformed RLE input is rejected", "[mask_rle]") {
  CHECK_THROWS_AS(RleFromString("0a~", 2, 2), std::invalid_argument);
  CHECK_THROWS_AS(DecodeMask(RleFromUncompressed({1, 5}, 2, 2)), std::invalid_argument);
  CHECK_THROWS_AS(DecodeMask(RleFromUncompressed({1, 1}, 2, 2)), std::invalid_argument);
}

TEST_CASE("merge and IoU follow set semantics", "[mask_rle]") {
  std::vector<uint8_t> a(100, 0), b(100, 0);
  for (int y = 0; y < 10; ++y) {
    for (int x = 0; x < 10; ++x) {
      a[y * 10 + x] = x < 6;
      b[y * 10 + x] = x >= 4;
    }
  }
  Rle ra = EncodeMask(a.data(), 10, 10), rb = EncodeMask(b.data(), 10, 10);
  CHECK(RleArea(MergeRles({ra, rb}, false)) == 100);
  CHECK(RleArea(MergeRles({ra, rb}, true)) == 20);
  auto iou = RleIou({ra}, {rb}, {false});
  CHECK(iou[0] == Approx(20.0 / 100.0));
  auto crowd = RleIou({ra}, {rb}, {true});
  CHECK(crowd[0] == Approx(20.0 / 60.0));
  Rle other{5, 5, {25}};
  CHECK(MergeRles({ra, other}, false) == Rle{});
}

TEST_CASE("merge and IoU end on RLEs whose counts do not add up (pycocotools hangs)",
          "[mask_rle]") {
  // 3x4 = 12 pixels; a's runs cover 5 of them (on: 2..4), b's all 12 (on: 1..10). The
  // pixels a does not cover count as background. Found by fuzzing (test/fuzz/fuzz_coco_json).
  const Rle a{3, 4, {2, 3}}, b{3, 4, {1, 10, 1}};
  CHECK(MergeRles({a, b}, false).counts == std::vector<uint32_t>{1, 10, 1});
  CHECK(MergeRles({a, b}, true).counts == std::vector<uint32_t>{2, 3, 7});
  CHECK(MergeRles({b, a}, true).counts == std::vector<uint32_t>{2, 3, 7});
  CHECK(RleIou({a}, {b}, {false})[0] == Approx(3.0 / 10.0));
  CHECK(RleIou({b}, {a}, {false})[0] == Approx(3.0 / 10.0));
}

TEST_CASE("polygon and box rasterisation cover the expected pixels", "[mask_rle]") {
  // Square from (2,2) to (6,6): pixel centres 2..5 inside.
  Rle r = RleFromPolygon({2, 2, 6, 2, 6, 6, 2, 6}, 10, 10);
  CHECK(RleArea(r) == 16);
  CHECK(RleToBbox(r) == std::array<double, 4>{2, 2, 4, 4});
  CHECK(RleFromBox({2, 2, 4, 4}, 10, 10) == r);
  // The pycocotools quirk: a 4-value polygon is a box.
  CHECK(RleFromPolygons({{2, 2, 4, 4}}, 10, 10) == r);
}

TEST_CASE("far-away, infinite and NaN polygon coordinates and huge sizes are refused, not UB",
          "[mask_rle]") {
  // Found by fuzzing: 5 x 1e10 overflowed int on frPoly's grid; 4e9 x 4e9 overflowed int64.
  CHECK_THROWS_AS(RleFromPolygon({1e10, 0, 5, 5, 0, 5}, 10, 10), std::invalid_argument);
  CHECK_THROWS_AS(RleFromPolygon({0, 0, 5, -1e8, 0, 5}, 10, 10), std::invalid_argument);
  CHECK_THROWS_AS(RleFromPolygon({0, 0, 5, 5, std::nan(""), 5}, 10, 10), std::invalid_argument);
  CHECK_THROWS_AS(RleFromPolygon({0, 0, 5, 5, HUGE_VAL, 5}, 10, 10), std::invalid_argument);
  CHECK_THROWS_AS(RleFromString("", 4'000'000'000, 4'000'000'000), std::invalid_argument);
  CHECK_THROWS_AS(RleFromPolygon({0, 0, 1, 1, 0, 1}, int64_t{1} << 62, 4), std::invalid_argument);
  // Far outside the image but within reach: rasterised as before.
  CHECK(RleArea(RleFromPolygon({-1e3, -10, 2e3, -10, 2e3, 20, -1e3, 20}, 10, 10)) == 100);
  // An empty image has no pixels, whatever the polygon.
  CHECK(RleFromPolygon({1e10, 0, 5, 5, 0, 5}, 0, 10) == Rle{0, 10, {0}});
  // A box is clamped to the image first: the same pixels as its visible part.
  CHECK(RleFromBox({-1e12, 2, 2e12, 4}, 10, 10) == RleFromBox({-1, 2, 12, 4}, 10, 10));
  CHECK(RleArea(RleFromBox({-1e12, 2, 2e12, 4}, 10, 10)) == 40);
}

TEST_CASE("an RLE of a 0-pixel image has an empty box whatever its counts (fuzzing)",
          "[mask_rle]") {
  // Uncompressed counts are taken as given; pycocotools divides by the height here.
  CHECK(RleToBbox(RleFromUncompressed({5, 3, 9, 3, 100}, 0, 10)) ==
        std::array<double, 4>{0, 0, 0, 0});
  CHECK(RleToBbox(RleFromUncompressed({0, 0}, 7, 0)) == std::array<double, 4>{0, 0, 0, 0});
  CHECK(RleArea(RleFromUncompressed({0, 4}, 0, 3)) == 4);
}
