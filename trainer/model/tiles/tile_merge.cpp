#include "trainer/model/tiles/tile_merge.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <string>

namespace mrcnn::model {
namespace {

float Area(const std::array<float, 4>& b) {
  return std::max(0.0f, b[2] - b[0]) * std::max(0.0f, b[3] - b[1]);
}

float Intersection(const std::array<float, 4>& a, const std::array<float, 4>& b) {
  const float w = std::min(a[2], b[2]) - std::max(a[0], b[0]);
  const float h = std::min(a[3], b[3]) - std::max(a[1], b[1]);
  return w > 0 && h > 0 ? w * h : 0.0f;
}

void CheckThreshold(float value, const char* name) {
  if (!(value >= 0.0f && value <= 1.0f)) {
    throw std::invalid_argument(std::string("tile merge option ") + name + " " +
                                std::to_string(value) + " is not within [0, 1]");
  }
}

// Kept boxes of one class, bucketed by a coarse grid so that a candidate is compared with
// the kept boxes near it only (a 8000x6000 image yields tens of thousands of candidates).
class KeptBoxes {
 public:
  explicit KeptBoxes(float cell) : cell_(cell) {}

  template <typename Visit>
  bool AnyNear(const std::array<float, 4>& box, Visit&& matches) const {
    const auto [cx0, cy0, cx1, cy1] = Cells(box);
    for (int64_t cy = cy0; cy <= cy1; ++cy) {
      for (int64_t cx = cx0; cx <= cx1; ++cx) {
        auto it = cells_.find({cx, cy});
        if (it == cells_.end())
          continue;
        for (size_t k : it->second) {
          if (matches(k))
            return true;
        }
      }
    }
    return false;
  }

  void Add(const std::array<float, 4>& box, size_t index) {
    const auto [cx0, cy0, cx1, cy1] = Cells(box);
    for (int64_t cy = cy0; cy <= cy1; ++cy) {
      for (int64_t cx = cx0; cx <= cx1; ++cx)
        cells_[{cx, cy}].push_back(index);
    }
  }

 private:
  std::array<int64_t, 4> Cells(const std::array<float, 4>& b) const {
    auto cell = [this](float v) {
      return static_cast<int64_t>(std::floor(std::clamp(v, -1e7f, 1e7f) / cell_));
    };
    return {cell(b[0]), cell(b[1]), std::max(cell(b[0]), cell(b[2])),
            std::max(cell(b[1]), cell(b[3]))};
  }

  float cell_;
  std::map<std::pair<int64_t, int64_t>, std::vector<size_t>> cells_;
};

}  // namespace

bool ReachesInnerTileEdge(const std::array<float, 4>& box, const TileRect& tile,
                          int64_t image_height, int64_t image_width, float margin) {
  const bool left_inner = tile.x > 0;
  const bool top_inner = tile.y > 0;
  const bool right_inner = tile.x + tile.width < image_width;
  const bool bottom_inner = tile.y + tile.height < image_height;
  return (left_inner && box[0] <= static_cast<float>(tile.x) + margin) ||
         (top_inner && box[1] <= static_cast<float>(tile.y) + margin) ||
         (right_inner && box[2] >= static_cast<float>(tile.x + tile.width) - margin) ||
         (bottom_inner && box[3] >= static_cast<float>(tile.y + tile.height) - margin);
}

std::vector<size_t> MergeTileCandidates(const std::vector<TileCandidate>& candidates,
                                        const TileMergeOptions& options) {
  CheckThreshold(options.iou_threshold, "iou_threshold");
  CheckThreshold(options.cut_ios_threshold, "cut_ios_threshold");
  // Grid cells about the size of a large box: few cells per box, few boxes per cell.
  float extent = 1.0f;
  for (const TileCandidate& c : candidates) {
    extent = std::max({extent, c.box[2] - c.box[0], c.box[3] - c.box[1]});
  }
  std::vector<size_t> order(candidates.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const TileCandidate& ca = candidates[a];
    const TileCandidate& cb = candidates[b];
    if (ca.cut != cb.cut)
      return !ca.cut;
    return ca.score > cb.score;
  });
  std::map<int64_t, KeptBoxes> kept_by_label;
  std::vector<size_t> kept;
  for (size_t i : order) {
    const TileCandidate& c = candidates[i];
    KeptBoxes& same_class =
        kept_by_label.try_emplace(c.label, std::min(extent, 4096.0f)).first->second;
    const float area = Area(c.box);
    const bool suppressed = same_class.AnyNear(c.box, [&](size_t k) {
      const TileCandidate& other = candidates[k];
      const float inter = Intersection(c.box, other.box);
      if (inter <= 0.0f)
        return false;
      const float other_area = Area(other.box);
      if (inter / (area + other_area - inter) > options.iou_threshold)
        return true;
      return (c.cut || other.cut) && inter / std::min(area, other_area) > options.cut_ios_threshold;
    });
    if (!suppressed) {
      same_class.Add(c.box, i);
      kept.push_back(i);
    }
  }
  std::stable_sort(kept.begin(), kept.end(),
                   [&](size_t a, size_t b) { return candidates[a].score > candidates[b].score; });
  return kept;
}

}  // namespace mrcnn::model
