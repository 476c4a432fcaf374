#include "trainer/model/tiles/tile_grid.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace mrcnn::model {
namespace {

// Tile starts along one axis of `length` pixels.
std::vector<int64_t> Starts(int64_t length, int64_t tile, double overlap) {
  if (length <= tile) {
    return {0};
  }
  const int64_t shared = static_cast<int64_t>(std::lround(static_cast<double>(tile) * overlap));
  const int64_t stride = std::max<int64_t>(1, tile - shared);
  // Enough tiles that the stride between evenly spread starts is at most `stride`.
  const int64_t count = (length - tile + stride - 1) / stride + 1;
  std::vector<int64_t> starts(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    // Evenly spread between 0 and length - tile: every neighbour pair shares at least
    // `shared` pixels and no tile sticks out.
    starts[static_cast<size_t>(i)] = (length - tile) * i / (count - 1);
  }
  return starts;
}

}  // namespace

bool TilingApplies(int64_t image_height, int64_t image_width, int64_t tile_size) {
  return tile_size > 0 && (image_height > tile_size || image_width > tile_size);
}

void CheckTileOptions(int64_t tile_size, double overlap) {
  if (tile_size < 0) {
    throw std::invalid_argument("tile size " + std::to_string(tile_size) +
                                " is negative: give the tile side in pixels, or 0 for no tiling");
  }
  if (!(overlap >= 0.0 && overlap <= 0.9)) {
    throw std::invalid_argument(
        "tile overlap " + std::to_string(overlap) +
        " is not a fraction within [0, 0.9] (0.2 shares a fifth of each tile)");
  }
}

std::vector<TileRect> TileGrid(int64_t image_height, int64_t image_width, int64_t tile_size,
                               double overlap) {
  CheckTileOptions(tile_size, overlap);
  if (!TilingApplies(image_height, image_width, tile_size)) {
    return {TileRect{0, 0, image_width, image_height}};
  }
  const int64_t tile_w = std::min(tile_size, image_width);
  const int64_t tile_h = std::min(tile_size, image_height);
  const std::vector<int64_t> xs = Starts(image_width, tile_w, overlap);
  const std::vector<int64_t> ys = Starts(image_height, tile_h, overlap);
  std::vector<TileRect> tiles;
  tiles.reserve(xs.size() * ys.size());
  for (int64_t y : ys) {
    for (int64_t x : xs) {
      tiles.push_back(TileRect{x, y, tile_w, tile_h});
    }
  }
  return tiles;
}

}  // namespace mrcnn::model
