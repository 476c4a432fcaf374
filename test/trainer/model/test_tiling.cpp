// Tiled inference's parts (issue 26): the tile grid, the merge across tiles, and masks
// pasted into their boxes only. The model-level checks (a shapes model on large canvases,
// shapes on tile borders, tiled = untiled on one tile) are test_tiled_predict.py.
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <random>

#include "kernels/ops.h"
#include "trainer/model/tiles/mask_region_paste.h"
#include "trainer/model/tiles/tile_grid.h"
#include "trainer/model/tiles/tile_merge.h"
#include "trainer/model/tiles/tiled_prediction.h"

using namespace mrcnn::model;

namespace mrcnn::model {
// For Catch's messages (Torch's headers print vectors through operator<< of the element).
std::ostream& operator<<(std::ostream& out, const TileRect& t) {
  return out << "{" << t.x << ", " << t.y << ", " << t.width << ", " << t.height << "}";
}
}  // namespace mrcnn::model

TEST_CASE("no tiling for tile size 0 or a tile no smaller than the image", "[tiles]") {
  CHECK_FALSE(TilingApplies(3000, 4000, 0));
  CHECK_FALSE(TilingApplies(3000, 4000, 4000));
  CHECK_FALSE(TilingApplies(600, 800, 1000));
  CHECK(TilingApplies(3000, 4000, 3999));
  CHECK(TilingApplies(600, 800, 700));
  CHECK(TileGrid(600, 800, 0, 0.2) == std::vector<TileRect>{{0, 0, 800, 600}});
  CHECK(TileGrid(600, 800, 800, 0.2) == std::vector<TileRect>{{0, 0, 800, 600}});
}

TEST_CASE("tiles have the full size, start at 0, end at the edge and share the overlap",
          "[tiles]") {
  std::mt19937 gen(5);
  for (int trial = 0; trial < 300; ++trial) {
    const int64_t h = 1 + gen() % 3000, w = 1 + gen() % 4000, size = 16 + gen() % 900;
    const double overlap = (gen() % 91) / 100.0;
    CAPTURE(h, w, size, overlap);
    const std::vector<TileRect> tiles = TileGrid(h, w, size, overlap);
    const int64_t shared = std::lround(static_cast<double>(size) * overlap);
    std::vector<int64_t> xs, ys;
    for (const TileRect& t : tiles) {
      REQUIRE(t.width == std::min(size, w));
      REQUIRE(t.height == std::min(size, h));
      REQUIRE(t.x >= 0);
      REQUIRE(t.y >= 0);
      REQUIRE(t.x + t.width <= w);
      REQUIRE(t.y + t.height <= h);
      if (t.y == tiles.front().y)
        xs.push_back(t.x);
      if (t.x == tiles.front().x)
        ys.push_back(t.y);
    }
    REQUIRE(tiles.size() == xs.size() * ys.size());
    for (const auto* starts : {&xs, &ys}) {
      const int64_t tile = starts == &xs ? std::min(size, w) : std::min(size, h);
      const int64_t length = starts == &xs ? w : h;
      CHECK(starts->front() == 0);
      CHECK(starts->back() + tile ==
            length);  // the last tile ends at the edge: every pixel covered
      for (size_t i = 1; i < starts->size(); ++i) {
        CHECK((*starts)[i] > (*starts)[i - 1]);
        CHECK((*starts)[i - 1] + tile - (*starts)[i] >=
              std::min(shared, tile - 1));  // shared pixels
      }
    }
  }
}

TEST_CASE("a 4000x3000 image in 800 px tiles with 0.2 overlap", "[tiles]") {
  const std::vector<TileRect> tiles = TileGrid(3000, 4000, 800, 0.2);
  // Stride at most 640: ceil(3200 / 640) + 1 = 6 columns, ceil(2200 / 640) + 1 = 5 rows.
  CHECK(tiles.size() == 30);
  CHECK(tiles[1].x == 640);
  CHECK(tiles.back() == TileRect{3200, 2200, 800, 800});
}

TEST_CASE("tile options are checked with the fix in the message", "[tiles]") {
  CHECK_THROWS_WITH(TileGrid(100, 100, -1, 0.2), Catch::Contains("0 for no tiling"));
  CHECK_THROWS_WITH(TileGrid(100, 100, 50, 0.95), Catch::Contains("[0, 0.9]"));
  CHECK_THROWS_AS(CheckTileOptions(50, -0.1), std::invalid_argument);
  CHECK_THROWS_AS(CheckTileOptions(50, std::nan("")), std::invalid_argument);
}

TEST_CASE("a box reaching an inner tile edge is cut, one on the image border is not", "[tiles]") {
  const TileRect left{0, 0, 100, 100}, middle{80, 0, 100, 100};
  // The left tile's right edge (x = 100) is inside a 180-wide image; its left edge is the border.
  CHECK(ReachesInnerTileEdge({60, 10, 100, 40}, left, 100, 180, 2));
  CHECK(ReachesInnerTileEdge({60, 10, 98.5f, 40}, left, 100, 180, 2));
  CHECK_FALSE(ReachesInnerTileEdge({60, 10, 97, 40}, left, 100, 180, 2));
  CHECK_FALSE(ReachesInnerTileEdge({0, 0, 50, 100}, left, 100, 180, 2));  // image borders only
  CHECK(ReachesInnerTileEdge({80, 10, 120, 40}, middle, 100, 180, 2));
  CHECK_FALSE(
      ReachesInnerTileEdge({120, 10, 180, 40}, middle, 100, 180, 2));  // right edge = border
}

TEST_CASE("the whole object beats its fragment cut by a tile edge, even a higher-scoring one",
          "[tiles]") {
  // An object spanning x 90..130 in a tile pair [0, 110) and [60, 160): the left tile sees it
  // cut at 110, the right tile whole.
  std::vector<TileCandidate> c = {
      {{90, 10, 110, 40}, 0.95f, 1, true},   // fragment, higher score
      {{90, 10, 130, 40}, 0.80f, 1, false},  // whole
      {{20, 10, 50, 40}, 0.70f, 1, false},   // another object of the class
      {{90, 10, 130, 40}, 0.60f, 2, false},  // same place, other class: kept (per-class merge)
  };
  CHECK(MergeTileCandidates(c, {}) == std::vector<size_t>{1, 2, 3});
}

TEST_CASE("copies of an object from overlapping tiles merge by NMS, neighbours stay", "[tiles]") {
  std::vector<TileCandidate> c = {
      {{10, 10, 30, 30}, 0.9f, 1, false},
      {{11, 10, 31, 30}, 0.8f, 1, false},  // the same object seen by the next tile
      {{32, 10, 52, 30}, 0.7f, 1, false},  // its neighbour, touching it
      {{25, 25, 45, 45}, 0.6f, 1, true},   // a cut box that overlaps the first only a little
  };
  CHECK(MergeTileCandidates(c, {}) == std::vector<size_t>{0, 2, 3});
  TileMergeOptions strict;
  strict.iou_threshold = 0.95f;
  CHECK(MergeTileCandidates(c, strict) == std::vector<size_t>{0, 1, 2, 3});
  strict.cut_ios_threshold = 2.0f;
  CHECK_THROWS_WITH(MergeTileCandidates(c, strict), Catch::Contains("cut_ios_threshold"));
}

TEST_CASE("the merge visits only nearby boxes yet matches a plain all-pairs merge", "[tiles]") {
  std::mt19937 gen(9);
  std::uniform_real_distribution<float> pos(0, 2000), side(4, 300), unit(0, 1);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<TileCandidate> c(400);
    for (auto& t : c) {
      const float x = pos(gen), y = pos(gen);
      t = {{x, y, x + side(gen), y + side(gen)},
           unit(gen),
           static_cast<int64_t>(1 + gen() % 3),
           gen() % 4 == 0};
    }
    // All pairs, same rule.
    std::vector<size_t> order(c.size());
    for (size_t i = 0; i < order.size(); ++i)
      order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return c[a].cut != c[b].cut ? !c[a].cut : c[a].score > c[b].score;
    });
    std::vector<size_t> expected;
    for (size_t i : order) {
      bool drop = false;
      for (size_t k : expected) {
        const auto& a = c[i].box;
        const auto& b = c[k].box;
        if (c[i].label != c[k].label)
          continue;
        const float iw = std::min(a[2], b[2]) - std::max(a[0], b[0]);
        const float ih = std::min(a[3], b[3]) - std::max(a[1], b[1]);
        if (iw <= 0 || ih <= 0)
          continue;
        const float inter = iw * ih, aa = (a[2] - a[0]) * (a[3] - a[1]),
                    ab = (b[2] - b[0]) * (b[3] - b[1]);
        drop = drop || inter / (aa + ab - inter) > 0.5f ||
               ((c[i].cut || c[k].cut) && inter / std::min(aa, ab) > 0.5f);
      }
      if (!drop)
        expected.push_back(i);
    }
    std::stable_sort(expected.begin(), expected.end(),
                     [&](size_t a, size_t b) { return c[a].score > c[b].score; });
    CHECK(MergeTileCandidates(c, {}) == expected);
  }
}

TEST_CASE("a mask pasted into its box equals the whole-image paste there, and it is 0 elsewhere",
          "[tiles]") {
  std::mt19937 gen(3);
  std::uniform_real_distribution<float> unit(0, 1);
  const int64_t h = 90, w = 120;
  for (int trial = 0; trial < 200; ++trial) {
    const int64_t r = trial % 2 ? 28 : 14;
    const at::Tensor probabilities =
        torch::rand({r, r}, torch::TensorOptions().dtype(torch::kFloat));
    // Boxes inside, across the border, tiny, and outside the image.
    const float x1 = -30 + 170 * unit(gen), y1 = -30 + 130 * unit(gen);
    const float bw = trial % 10 == 0 ? 0.4f : 1 + 80 * unit(gen),
                bh = trial % 10 == 0 ? 0.7f : 1 + 60 * unit(gen);
    const std::array<float, 4> box{x1, y1, x1 + bw, y1 + bh};
    CAPTURE(trial, box[0], box[1], box[2], box[3]);
    const at::Tensor full = mrcnn::kernels::PasteMasksBinary(
        probabilities.view({1, 1, r, r}),
        torch::tensor({box[0], box[1], box[2], box[3]}).view({1, 4}), h, w, 1, 0.5)[0][0];
    const RegionMask m = PasteMaskRegion(probabilities, box, h, w, 0.5);
    REQUIRE(m.bits.size() == static_cast<size_t>(m.region.width * m.region.height));
    REQUIRE(m.region.x >= 0);
    REQUIRE(m.region.y >= 0);
    REQUIRE(m.region.x + m.region.width <= w);
    REQUIRE(m.region.y + m.region.height <= h);
    at::Tensor rebuilt = torch::zeros({h, w}, torch::kByte);
    if (!m.bits.empty()) {
      rebuilt.narrow(0, m.region.y, m.region.height)
          .narrow(1, m.region.x, m.region.width)
          .copy_(torch::from_blob(const_cast<uint8_t*>(m.bits.data()),
                                  {m.region.height, m.region.width}, torch::kByte));
    }
    CHECK(torch::equal(rebuilt, full));
  }
}

TEST_CASE("a tiled image's detection cap grows with its tiles unless the caller set one",
          "[tiles]") {
  using mrcnn::model::PredictOptions;
  using mrcnn::model::TiledDetectionCap;
  PredictOptions o;  // max_detections 100 per tile, no cap set, at most 1000
  CHECK(TiledDetectionCap(o, 1) == 100);
  CHECK(TiledDetectionCap(o, 6) == 600);
  CHECK(TiledDetectionCap(o, 40) == 1000);  // bounded by max_detections_cap
  o.max_detections_cap = 50;                // a cap below the per-tile count: per-tile wins
  CHECK(TiledDetectionCap(o, 40) == 100);
  o.max_detections_cap = 1000;
  o.tiled_max_detections = 100;  // the caller's own cap holds, whatever the tiles
  CHECK(TiledDetectionCap(o, 40) == 100);
  o.tiled_max_detections = 0;
  o.max_detections = 300;
  CHECK(TiledDetectionCap(o, 2) == 600);
  CHECK(TiledDetectionCap(o, 0) == 300);
}
