#pragma once
// The output size of a resize by the shortest edge, shared by the data pipeline (training,
// evaluation) and inference. Torch-free and OpenCV-free.
#include <array>
#include <cstdint>

namespace mrcnn::data {

// (height, width) for a height x width image and a chosen shortest edge: Detectron2's
// ResizeShortestEdge.get_output_shape in its arithmetic (the short side set to min_size, both
// scaled down when the long side exceeds max_size, int(x + 0.5) rounding; max_size <= 0: no
// cap), at least 1 pixel.
std::array<int64_t, 2> ResizedSize(int64_t height, int64_t width, int64_t min_size,
                                   int64_t max_size);

}  // namespace mrcnn::data
