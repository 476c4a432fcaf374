#pragma once
// Re-laying out class-dependent layers: operations on the slices of a RawTensor along its
// first dimension (a Linear's output rows, a convolution's output channels, a bias's
// entries), so that weights and biases are moved alike. Each throws std::invalid_argument
// when the tensor is 0-d or has too few rows. Torch-free.
#include <cstdint>

#include "trainer/model/weights/raw_tensor.h"

namespace mrcnn::model::weights {

// Moves row `from` to position `to`, shifting the rows between by one.
void MoveRow(RawTensor& tensor, int64_t from, int64_t to);
// Removes the first `count` rows.
void DropLeadingRows(RawTensor& tensor, int64_t count);
// Inserts `count` rows of zeros in front.
void PrependZeroRows(RawTensor& tensor, int64_t count);
// The whole tensor `times` times over along the first dimension.
void RepeatRows(RawTensor& tensor, int64_t times);

}  // namespace mrcnn::model::weights
