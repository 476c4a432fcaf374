#pragma once
// Run-length encoded binary masks, bit-identical to pycocotools' mask API (maskApi.c).
//
// Contract (same as COCO): runs are taken over the mask in COLUMN-major order (x outer,
// y inner) and alternate 0,1,0,...; the first run counts zeros and may be 0. Callers of
// this header pass and receive ROW-major H×W buffers; the transposition is internal.
// Everything here is Torch-free and OpenCV-free (target mrcnn_coco).
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace mrcnn::data {

struct Rle {
  int64_t height = 0;
  int64_t width = 0;
  std::vector<uint32_t> counts;
  bool operator==(const Rle&) const = default;
};

// mask: ROW-major height×width, nonzero = foreground.
Rle EncodeMask(const uint8_t* mask, int64_t height, int64_t width);

// A rectangle of an image, in pixels: columns x .. x + width - 1, rows y .. y + height - 1.
struct MaskRegion {
  int64_t x = 0;
  int64_t y = 0;
  int64_t width = 0;
  int64_t height = 0;
  bool operator==(const MaskRegion&) const = default;
};

// The RLE of an image_height×image_width mask that is zero outside `region` and holds
// `region_mask` (ROW-major region.height×region.width, nonzero = foreground) inside it:
// what EncodeMask gives for the full mask, without ever making it (tiled inference keeps
// each detection's mask as its box only). Throws std::invalid_argument when the region
// does not lie within the image.
Rle EncodeMaskRegion(const uint8_t* region_mask, const MaskRegion& region, int64_t image_height,
                     int64_t image_width);
// The RLE of a height×width mask from its change points: the COLUMN-major indices, strictly
// increasing and below height·width, where a pixel differs from the one before (pixel -1
// counting as 0), as mrcnn::mask_rle_changes gives them per mask. Equals EncodeMask of that
// mask. Throws std::invalid_argument when the indices are not so.
Rle RleFromChanges(const int32_t* changes, int64_t count, int64_t height, int64_t width);

// Returns ROW-major height×width of 0/1. Throws std::invalid_argument when the counts
// do not sum to height*width.
std::vector<uint8_t> DecodeMask(const Rle& rle);

// pycocotools' compressed "counts" string (6 bits per char, ASCII 48..111, runs after
// the second stored as the difference to the run two before).
std::string RleCountsToString(const Rle& rle);
// Inverse of RleCountsToString. Throws std::invalid_argument on a malformed string.
Rle RleFromString(const std::string& counts, int64_t height, int64_t width);
// COCO "uncompressed RLE" ({"counts": [..], "size": [h, w]}).
Rle RleFromUncompressed(const std::vector<uint32_t>& counts, int64_t height, int64_t width);

// Throws std::invalid_argument unless every coordinate of the polygon is finite and within
// +-2^26 pixels: beyond that pycocotools' frPoly overflows int on its 5x grid (undefined
// behaviour; found by fuzzing). No real annotation comes near.
void CheckPolygonReach(const std::vector<double>& xy);
// One polygon [x0,y0,x1,y1,...] in pixel coordinates, rasterised like pycocotools frPoly.
// Throws std::invalid_argument as CheckPolygonReach does (not for an empty image: no pixels).
Rle RleFromPolygon(const std::vector<double>& xy, int64_t height, int64_t width);
// Several polygons of one object, merged (union), like COCO.annToRLE for a polygon list.
// Note pycocotools' quirk, kept here: a 4-value "polygon" is read as a box [x,y,w,h].
Rle RleFromPolygons(const std::vector<std::vector<double>>& polygons, int64_t height,
                    int64_t width);
// Box [x, y, w, h] rasterised like pycocotools frBbox (sides far outside the image are
// clamped to it first, which covers the same pixels).
Rle RleFromBox(const std::array<double, 4>& xywh, int64_t height, int64_t width);

// Union (intersect=false) or intersection of masks of equal size; an empty list gives an
// empty Rle; a size mismatch gives a 0×0 Rle (pycocotools semantics).
Rle MergeRles(const std::vector<Rle>& rles, bool intersect);
// Number of foreground pixels.
uint64_t RleArea(const Rle& rle);
// Tight box [x, y, w, h] of the foreground; all zeros for an empty mask.
std::array<double, 4> RleToBbox(const Rle& rle);

// IoU matrix, dt-major: result[d * gt.size() + g]. For a crowd gt the union is the dt
// area. Masks of different sizes give -1. iscrowd has gt.size() entries (or is empty).
std::vector<double> RleIou(const std::vector<Rle>& dt, const std::vector<Rle>& gt,
                           const std::vector<bool>& iscrowd);
// Box IoU with the same conventions (boxes [x, y, w, h]), like pycocotools bbIou.
std::vector<double> BoxIou(const std::vector<std::array<double, 4>>& dt,
                           const std::vector<std::array<double, 4>>& gt,
                           const std::vector<bool>& iscrowd);

}  // namespace mrcnn::data
