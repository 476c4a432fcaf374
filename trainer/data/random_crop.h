#pragma once
// The training crop (INPUT.CROP.*, issue 26): a random window of a large image at its
// native resolution, taken before the resize as Detectron2 does, so that small objects
// of 4000x3000 aerial images keep their pixels. Instances are moved into the window's
// coordinates and clipped to it; one that keeps less than CropSpec::min_area_fraction of
// its area, or nothing, is dropped. Masks stay masks: polygons are only translated (the
// transform rasterises them at the final size, where the part outside is not drawn), RLE
// masks are cropped. Torch-free and OpenCV-free.
#include <array>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "trainer/data/coco_dataset.h"
#include "trainer/data/crop_spec.h"

namespace mrcnn::data {

// The crop's (height, width) for an image of that size, Detectron2's
// RandomCrop.get_crop_size; the range types draw from `rng`. Never larger than the image
// (a smaller image is taken whole, not padded) and at least 1x1.
std::array<int64_t, 2> CropSize(int64_t height, int64_t width, const CropSpec& spec,
                                std::mt19937_64& rng);

// A window of CropSize placed uniformly at random within the image.
MaskRegion RandomCropWindow(int64_t height, int64_t width, const CropSpec& spec,
                            std::mt19937_64& rng);

// The annotations of an image_height×image_width image as seen through `window`: boxes
// and masks in the window's coordinates (a box cut by the window is the box of the mask
// part left inside, or the clipped box without a mask). Crowd and unlabelled annotations
// are left out, as the transforms leave them out; so is an instance whose remaining area
// is empty or below `min_area_fraction` of its whole area. Throws std::invalid_argument for
// an RLE whose size is not the image's.
std::vector<CocoAnnotation> CropAnnotations(std::span<const CocoAnnotation> annotations,
                                            const MaskRegion& window, int64_t image_height,
                                            int64_t image_width, double min_area_fraction);

}  // namespace mrcnn::data
