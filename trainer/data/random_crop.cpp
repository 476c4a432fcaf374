#include "trainer/data/random_crop.h"

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string>

#include "trainer/data/rle_crop.h"

namespace mrcnn::data {

namespace {

// A uniform draw in [0, 1) from 53 random bits (as transforms.cpp draws the flip).
double UniformUnit(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

// A uniform integer in [low, high] (high >= low); portable, unlike the std distributions.
int64_t UniformInt(int64_t low, int64_t high, std::mt19937_64& rng) {
  return low + static_cast<int64_t>(rng() % static_cast<uint64_t>(high - low + 1));
}

// Python's int(v * fraction + 0.5), as Detectron2 rounds the relative sizes.
int64_t RoundedFraction(int64_t side, double fraction) {
  return static_cast<int64_t>(static_cast<double>(side) * fraction + 0.5);
}

struct Box {
  double x0, y0, x1, y1;
  double Area() const { return std::max(0.0, x1 - x0) * std::max(0.0, y1 - y0); }
  bool Empty() const { return !(x1 > x0 && y1 > y0); }
};

Box Intersection(const Box& a, const Box& b) {
  return {std::max(a.x0, b.x0), std::max(a.y0, b.y0), std::min(a.x1, b.x1), std::min(a.y1, b.y1)};
}

CocoPolygons Translated(const CocoPolygons& polygons, double dx, double dy) {
  CocoPolygons moved = polygons;
  for (auto& p : moved) {
    for (size_t i = 0; i + 1 < p.size(); i += 2) {
      p[i] += dx;
      p[i + 1] += dy;
    }
  }
  return moved;
}

// What a mask keeps inside the window: the cut mask (window coordinates) and both areas.
struct MaskCut {
  Rle visible;
  uint64_t visible_area = 0;
  uint64_t whole_area = 0;
};

// The annotation seen through the window, or nothing when it is dropped.
std::optional<CocoAnnotation> CropInstance(const CocoAnnotation& a, const MaskRegion& window,
                                           int64_t image_height, int64_t image_width,
                                           double min_area_fraction) {
  const double dx = -static_cast<double>(window.x), dy = -static_cast<double>(window.y);
  const Box frame{0, 0, static_cast<double>(window.width), static_cast<double>(window.height)};
  const Box box{a.bbox[0] + dx, a.bbox[1] + dy, a.bbox[0] + a.bbox[2] + dx,
                a.bbox[1] + a.bbox[3] + dy};  // in window coordinates
  Box kept_box = Intersection(box, frame);
  if (kept_box.Empty())
    return std::nullopt;
  const bool whole = kept_box.x0 == box.x0 && kept_box.y0 == box.y0 && kept_box.x1 == box.x1 &&
                     kept_box.y1 == box.y1;
  CocoAnnotation out = a;
  // Keypoints move with the window; one that leaves it is marked outside the image later
  // (the transform's bounds check), as Detectron2's crop does.
  for (size_t k = 0; k + 2 < out.keypoints.size(); k += 3) {
    out.keypoints[k] += static_cast<float>(dx);
    out.keypoints[k + 1] += static_cast<float>(dy);
  }
  std::optional<MaskCut> cut;
  if (const auto* polygons = std::get_if<CocoPolygons>(&a.segmentation);
      polygons && !polygons->empty()) {
    CocoPolygons moved = Translated(*polygons, dx, dy);
    if (!whole) {
      cut = MaskCut{RleFromPolygons(moved, window.height, window.width)};
      cut->whole_area = RleArea(RleFromPolygons(*polygons, image_height, image_width));
    }
    out.segmentation = std::move(moved);
  } else if (const auto* rle = std::get_if<Rle>(&a.segmentation)) {
    if (rle->height != image_height || rle->width != image_width) {
      throw std::invalid_argument("annotation " + std::to_string(a.id) + ": RLE size " +
                                  std::to_string(rle->height) + "x" + std::to_string(rle->width) +
                                  " differs from its image's " + std::to_string(image_height) +
                                  "x" + std::to_string(image_width) +
                                  " (the crop needs them equal: fix the annotation's \"size\")");
    }
    Rle visible = CropRle(*rle, window);
    if (!whole)
      cut = MaskCut{visible, 0, RleArea(*rle)};
    out.segmentation = std::move(visible);
  }
  if (!whole) {
    // Mask area where there is a mask, else box area.
    double fraction = kept_box.Area() / box.Area();
    if (cut && cut->whole_area > 0) {
      cut->visible_area = RleArea(cut->visible);
      fraction = static_cast<double>(cut->visible_area) / static_cast<double>(cut->whole_area);
    }
    if (!(fraction > 0) || fraction < min_area_fraction)
      return std::nullopt;
    // Like Detectron2 with a crop (DatasetMapper's recompute_boxes), the box of a cut
    // instance is the box of what is left of its mask: the clipped box of a cut circle
    // would be taller than the visible cap.
    if (cut && cut->visible_area > 0) {
      const auto m = RleToBbox(cut->visible);
      const Box tight = Intersection(kept_box, {m[0], m[1], m[0] + m[2], m[1] + m[3]});
      if (!tight.Empty())  // else the annotation's box and mask disagree: keep its box
        kept_box = tight;
    }
    out.area = a.area * fraction;
  }
  out.bbox = {kept_box.x0, kept_box.y0, kept_box.x1 - kept_box.x0, kept_box.y1 - kept_box.y0};
  return out;
}

}  // namespace

std::array<int64_t, 2> CropSize(int64_t height, int64_t width, const CropSpec& spec,
                                std::mt19937_64& rng) {
  const auto [size_h, size_w] = spec.size;
  int64_t h = height, w = width;
  switch (spec.type) {
    case CropType::kRelative:
      h = RoundedFraction(height, size_h);
      w = RoundedFraction(width, size_w);
      break;
    case CropType::kRelativeRange: {
      const double fh = size_h + UniformUnit(rng) * (1 - size_h);
      const double fw = size_w + UniformUnit(rng) * (1 - size_w);
      h = RoundedFraction(height, fh);
      w = RoundedFraction(width, fw);
      break;
    }
    case CropType::kAbsolute:
      h = static_cast<int64_t>(size_h);
      w = static_cast<int64_t>(size_w);
      break;
    case CropType::kAbsoluteRange: {
      const auto low = static_cast<int64_t>(size_h), high = static_cast<int64_t>(size_w);
      h = UniformInt(std::min(height, low), std::min(height, high), rng);
      w = UniformInt(std::min(width, low), std::min(width, high), rng);
      break;
    }
  }
  return {std::clamp<int64_t>(h, 1, height), std::clamp<int64_t>(w, 1, width)};
}

MaskRegion RandomCropWindow(int64_t height, int64_t width, const CropSpec& spec,
                            std::mt19937_64& rng) {
  const auto [h, w] = CropSize(height, width, spec, rng);
  // Detectron2's order: the top edge first, then the left edge.
  const int64_t y = UniformInt(0, height - h, rng);
  const int64_t x = UniformInt(0, width - w, rng);
  return {x, y, w, h};
}

std::vector<CocoAnnotation> CropAnnotations(std::span<const CocoAnnotation> annotations,
                                            const MaskRegion& window, int64_t image_height,
                                            int64_t image_width, double min_area_fraction) {
  std::vector<CocoAnnotation> kept;
  for (const auto& a : annotations) {
    if (a.iscrowd || a.label <= 0)
      continue;
    if (auto cropped = CropInstance(a, window, image_height, image_width, min_area_fraction))
      kept.push_back(std::move(*cropped));
  }
  return kept;
}

}  // namespace mrcnn::data
