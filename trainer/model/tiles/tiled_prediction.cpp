#include "trainer/model/tiles/tiled_prediction.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "trainer/model/inference/inference_state.h"
#include "trainer/model/tiles/mask_region_paste.h"
#include "trainer/model/tiles/tile_grid.h"
#include "trainer/model/tiles/tile_merge.h"

namespace mrcnn::model {
namespace {

// A box this close to a tile edge inside the image counts as cut by it. The model clips a
// cut object's box to the tile, so its edge lies on the tile's edge; the margin absorbs
// box regression's error, and an object merely near the edge that is marked cut loses
// nothing: its whole copy in the neighbouring tile (the overlap holds it) wins instead.
float CutMargin(int64_t tile_size) {
  return std::max(2.0f, 0.01f * static_cast<float>(tile_size));
}

struct Candidates {
  std::vector<TileCandidate> boxes;
  std::vector<at::Tensor> masks;  // R x R probabilities per candidate (undefined without masks)
  std::vector<std::vector<std::array<float, 3>>> keypoints;  // per candidate, in image pixels

  // Adds one model result of a region whose top-left corner is (x, y) in the image; `tile`
  // is the tile it came from, or nullptr for the whole-image pass (nothing is cut there).
  void Add(const ImageResult& r, int64_t x, int64_t y, const TileRect* tile, int64_t image_height,
           int64_t image_width, float margin) {
    const at::Tensor b = r.boxes.to(torch::kCPU, torch::kFloat).contiguous();
    const at::Tensor s = r.scores.to(torch::kCPU, torch::kFloat).contiguous();
    const at::Tensor l = r.labels.to(torch::kCPU, torch::kLong).contiguous();
    const float* pb = b.data_ptr<float>();
    const float* ps = s.data_ptr<float>();
    const int64_t* pl = l.data_ptr<int64_t>();
    const float dx = static_cast<float>(x), dy = static_cast<float>(y);
    const at::Tensor points = r.keypoints.defined()
                                  ? r.keypoints.to(torch::kCPU, torch::kFloat).contiguous()
                                  : at::Tensor();
    for (int64_t k = 0; k < b.size(0); ++k) {
      TileCandidate c;
      c.box = {pb[4 * k] + dx, pb[4 * k + 1] + dy, pb[4 * k + 2] + dx, pb[4 * k + 3] + dy};
      c.score = ps[k];
      c.label = pl[k];
      c.cut =
          tile != nullptr && ReachesInnerTileEdge(c.box, *tile, image_height, image_width, margin);
      boxes.push_back(c);
      masks.push_back(r.masks.defined() ? r.masks[k][0] : at::Tensor());
      std::vector<std::array<float, 3>> moved;
      if (points.defined()) {
        const float* p = points[k].data_ptr<float>();
        for (int64_t j = 0; j < points.size(1); ++j, p += 3)
          moved.push_back({p[0] + dx, p[1] + dy, p[2]});
      }
      keypoints.push_back(std::move(moved));
    }
  }
};

}  // namespace

int64_t TiledDetectionCap(const PredictOptions& options, int64_t passes) {
  if (options.tiled_max_detections > 0)
    return options.tiled_max_detections;
  const int64_t per_pass = std::max(options.max_detections, 0);
  const int64_t grown = per_pass * std::max<int64_t>(passes, 1);
  return std::max(per_pass, std::min<int64_t>(grown, options.max_detections_cap));
}

std::vector<TiledDetection> PredictTiled(MetaArchitecture& net, const BatchForward& forward,
                                         const torch::Device& device, const at::Tensor& hwc,
                                         const PredictOptions& options) {
  const TileOptions& tiling = options.tiles;
  CheckTileOptions(tiling.size, tiling.overlap);
  if (tiling.batch < 1) {
    throw std::invalid_argument("tile batch " + std::to_string(tiling.batch) +
                                " must be at least 1 (tiles per forward pass)");
  }
  const int64_t height = hwc.size(0), width = hwc.size(1);
  // The caller's settings come back on every exit path.
  struct RestoreSettings {
    DetectionSettings& live;
    const DetectionSettings saved;
    ~RestoreSettings() { live = saved; }
  } restore{net.detection_settings(), net.detection_settings()};
  DetectionSettings& s = net.detection_settings();
  s.score_thresh = options.score_threshold;
  s.detections_per_image = options.max_detections;
  s.masks = options.masks && net.config().mask_on;
  s.mask_threshold = -1.0;  // probabilities, pasted below for the kept detections only
  s.paste_masks = false;

  const std::vector<TileRect> tiles = TileGrid(height, width, tiling.size, tiling.overlap);
  const float margin = CutMargin(tiling.size);
  Candidates candidates;
  const size_t batch = static_cast<size_t>(tiling.batch);
  for (size_t begin = 0; begin < tiles.size(); begin += batch) {
    const size_t end = std::min(tiles.size(), begin + batch);
    ModelInputs inputs;
    for (size_t t = begin; t < end; ++t) {
      const TileRect& tile = tiles[t];
      AddModelInput(
          net.config(),
          hwc.slice(0, tile.y, tile.y + tile.height).slice(1, tile.x, tile.x + tile.width), device,
          inputs);
    }
    const std::vector<ImageResult> out = forward(inputs);
    for (size_t t = begin; t < end; ++t) {
      candidates.Add(out[t - begin], tiles[t].x, tiles[t].y, &tiles[t], height, width, margin);
    }
  }
  if (tiling.full_image) {
    ModelInputs whole;
    AddModelInput(net.config(), hwc, device, whole);
    const std::vector<ImageResult> out = forward(whole);
    candidates.Add(out[0], 0, 0, nullptr, height, width, margin);
  }

  const std::vector<size_t> kept =
      MergeTileCandidates(candidates.boxes, {tiling.merge_iou, tiling.cut_ios});
  const int64_t passes = static_cast<int64_t>(tiles.size()) + (tiling.full_image ? 1 : 0);
  const size_t count =
      std::min(kept.size(), static_cast<size_t>(TiledDetectionCap(options, passes)));
  std::vector<TiledDetection> result;
  result.reserve(count);
  for (size_t j = 0; j < count; ++j) {
    const TileCandidate& c = candidates.boxes[kept[j]];
    // Boxes are clipped to their tile (or the image), so they lie within the image.
    TiledDetection d{c.box, c.score, c.label, {}, candidates.keypoints[kept[j]]};
    if (s.masks && candidates.masks[kept[j]].defined()) {
      d.mask = net.config().detectron2()
                   ? PasteMaskRegionDetectron2(candidates.masks[kept[j]], c.box, height, width,
                                               options.mask_threshold)
                   : PasteMaskRegion(candidates.masks[kept[j]], c.box, height, width,
                                     options.mask_threshold);
    }
    result.push_back(std::move(d));
  }
  return result;
}

}  // namespace mrcnn::model
