#pragma once
// Where the tiles of a large image lie (tiled inference, issue 26). Torch-free.
//
// Contract: tiles are tile_size x tile_size (a side no longer than the image's is the
// image's side), neighbours share at least round(tile_size * overlap) pixels, the first
// tile of a row or column starts at 0 and the last ends at the image's edge (it is moved
// back rather than cut short, so every tile has the full size and a batch pads nothing),
// and together they cover every pixel. Order: row by row, left to right.
#include <cstdint>
#include <vector>

namespace mrcnn::model {

struct TileRect {
  int64_t x = 0;  // left column in image pixels
  int64_t y = 0;  // top row
  int64_t width = 0;
  int64_t height = 0;
  bool operator==(const TileRect&) const = default;
};

// Whether tiling applies: a tile size of 0, or one no smaller than both sides, means the
// image runs whole.
bool TilingApplies(int64_t image_height, int64_t image_width, int64_t tile_size);

// Throws std::invalid_argument naming the option when tile_size < 0 or overlap is not in
// [0, 0.9] (at 0.9 the stride is a tenth of the tile; more would only multiply the work).
void CheckTileOptions(int64_t tile_size, double overlap);

// The tiles covering the image (one tile, the whole image, when tiling does not apply).
std::vector<TileRect> TileGrid(int64_t image_height, int64_t image_width, int64_t tile_size,
                               double overlap);

}  // namespace mrcnn::model
