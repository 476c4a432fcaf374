#pragma once
// Cropping a run-length encoded mask to a rectangle without decoding it: the training crop
// (random_crop.h) cuts the masks of large images, where a decoded mask per instance would
// be tens of MB. Torch-free and OpenCV-free (target mrcnn_coco).
#include "trainer/data/mask_rle.h"

namespace mrcnn::data {

// The region.height×region.width mask that `rle` holds inside `region`: equal to
// EncodeMask of the region cut from DecodeMask(rle), in O(runs + region.width) time.
// Throws std::invalid_argument when the region is empty or does not lie within the mask.
Rle CropRle(const Rle& rle, const MaskRegion& region);

}  // namespace mrcnn::data
