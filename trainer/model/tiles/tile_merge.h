#pragma once
// Merging the detections of overlapping tiles into one list for the whole image (tiled
// inference, issue 26). Torch-free: it works on boxes, scores and labels only, so the
// masks of the detections it drops are never pasted.
//
// An object inside the overlap of two tiles is found by both; one lying across a tile's
// edge is found whole by a tile that holds it (the overlap is wider than the object) and
// as a cut fragment by the tile whose edge cuts it. Plain NMS keeps such a fragment beside
// the whole object, since a fragment's IoU with the whole box is small. So a detection is
// marked `cut` when its box reaches within a margin of an edge of its tile that lies
// inside the image, and the merge
//   - visits detections per class, whole ones first, each group by decreasing score;
//   - drops a detection whose IoU with a kept one of its class is above `iou_threshold`
//     (NMS over the union of the tiles), or, when either of the two is cut, whose
//     intersection over the smaller box is above `cut_ios_threshold` (the fragment lies
//     inside the whole object's box).
// Whole detections before cut ones means the whole object wins over its fragments even
// when a fragment scores higher; an object that no tile holds whole (larger than the
// overlap) keeps its largest-scoring fragment unless the whole-image pass found it.
#include <array>
#include <cstdint>
#include <vector>

#include "trainer/model/tiles/tile_grid.h"

namespace mrcnn::model {

struct TileCandidate {
  std::array<float, 4> box{};  // x1, y1, x2, y2 in image pixels
  float score = 0.0f;
  int64_t label = 0;
  bool cut = false;
};

struct TileMergeOptions {
  float iou_threshold = 0.5f;      // the model's own NMS threshold by default
  float cut_ios_threshold = 0.5f;  // intersection over the smaller box, when one is cut
};

// Whether a box found in `tile` reaches within `margin` pixels of one of the tile's edges
// that lie inside the image (an edge on the image's border cuts nothing).
bool ReachesInnerTileEdge(const std::array<float, 4>& box, const TileRect& tile,
                          int64_t image_height, int64_t image_width, float margin);

// Indices of the kept candidates, by decreasing score. Throws std::invalid_argument
// naming the option when a threshold is not within [0, 1].
std::vector<size_t> MergeTileCandidates(const std::vector<TileCandidate>& candidates,
                                        const TileMergeOptions& options);

}  // namespace mrcnn::model
