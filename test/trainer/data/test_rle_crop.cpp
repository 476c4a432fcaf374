#include <catch2/catch.hpp>
#include <random>

#include "trainer/data/rle_crop.h"

using namespace mrcnn::data;

namespace {

// The reference: decode, cut the region out row by row, encode.
Rle CropByDecoding(const Rle& rle, const MaskRegion& r) {
  const std::vector<uint8_t> full = DecodeMask(rle);
  std::vector<uint8_t> part(static_cast<size_t>(r.width * r.height));
  for (int64_t y = 0; y < r.height; ++y)
    for (int64_t x = 0; x < r.width; ++x)
      part[y * r.width + x] = full[(r.y + y) * rle.width + r.x + x];
  return EncodeMask(part.data(), r.height, r.width);
}

}  // namespace

TEST_CASE("CropRle equals decoding, cutting the region out and encoding", "[rle_crop]") {
  std::mt19937 gen(7);
  for (int trial = 0; trial < 500; ++trial) {
    const int64_t h = 1 + gen() % 40, w = 1 + gen() % 40;
    std::vector<uint8_t> bits(static_cast<size_t>(h * w));
    const int kind = trial % 4;  // noise, blobs (long runs), all ones, empty
    const int64_t cx = gen() % w, cy = gen() % h, r = 1 + gen() % 20;
    for (int64_t y = 0; y < h; ++y) {
      for (int64_t x = 0; x < w; ++x) {
        const bool blob = (x - cx) * (x - cx) + (y - cy) * (y - cy) <= r * r;
        bits[y * w + x] = kind == 0 ? gen() % 2 : kind == 1 ? blob : kind == 2 ? 1 : 0;
      }
    }
    const Rle rle = EncodeMask(bits.data(), h, w);
    MaskRegion region;
    region.x = gen() % w;
    region.y = gen() % h;
    region.width = 1 + gen() % (w - region.x);
    region.height = 1 + gen() % (h - region.y);
    CAPTURE(trial, h, w, region.x, region.y, region.width, region.height);
    const Rle cropped = CropRle(rle, region);
    CHECK(cropped == CropByDecoding(rle, region));
    CHECK(RleArea(cropped) <= RleArea(rle));
  }
  // The whole mask is itself.
  const uint8_t m[] = {0, 1, 1, 0, 1, 0};
  const Rle whole = EncodeMask(m, 2, 3);
  CHECK(CropRle(whole, {0, 0, 3, 2}) == whole);
}

TEST_CASE("CropRle refuses a region outside the mask, an empty one and short counts",
          "[rle_crop]") {
  const Rle rle{4, 5, {20}};
  CHECK_THROWS_WITH(CropRle(rle, {3, 0, 3, 4}), Catch::Contains("does not lie within the 5x4"));
  CHECK_THROWS_WITH(CropRle(rle, {-1, 0, 2, 2}), Catch::Contains("does not lie within"));
  CHECK_THROWS_WITH(CropRle(rle, {0, 0, 0, 2}), Catch::Contains("does not lie within"));
  CHECK_THROWS_WITH(CropRle(Rle{4, 5, {3, 2}}, {0, 0, 5, 4}), Catch::Contains("fewer than"));
  CHECK(CropRle(Rle{4, 5, {3, 2}}, {0, 0, 1, 4}) == Rle{4, 1, {3, 1}});  // enough for column 0
}
