#pragma once
// Which keypoint each keypoint becomes under a horizontal flip, from the keypoints' names:
// a name with "left" in it and the same name with "right" instead swap (COCO's
// left_eye/right_eye, the keypoint shapes' left_top/right_top), others stay. Detectron2
// takes the same pairs from its dataset metadata (keypoint_flip_map). Torch-free.
#include <cstdint>
#include <string>
#include <vector>

#include "trainer/data/coco_dataset.h"

namespace mrcnn::data {

// flip[k] = the index of k's mirror name, or k. Throws std::invalid_argument when a name
// appears twice (the mapping would be ambiguous).
std::vector<int64_t> KeypointFlipIndices(const std::vector<std::string>& names);

// The keypoint names the dataset's categories declare: those of the categories that list
// any (they must all list the same ones, which is what a single keypoint head predicts);
// empty when none does. Throws std::invalid_argument naming the two categories otherwise.
std::vector<std::string> DatasetKeypointNames(const std::vector<CocoCategory>& categories);

}  // namespace mrcnn::data
