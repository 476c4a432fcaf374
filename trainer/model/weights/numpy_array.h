#pragma once
// Numpy arrays as pickle records them (Detectron2's and Caffe2's .pkl checkpoints), read
// from the value tree without numpy. Three forms, under numpy.core.* (numpy 1, Python 2)
// or numpy._core.* (numpy 2):
//   - multiarray._reconstruct(ndarray, (0,), b"b") + BUILD (version, shape, dtype,
//     is_fortran, raw bytes): protocols 2 to 4, and Python 2's pickles;
//   - numeric._frombuffer(bytes, dtype, shape, order): protocol 5;
//   - multiarray.scalar(dtype, raw bytes): a numpy scalar, read as a 0-d array.
// The dtype is numpy.dtype(typestr, False, True) + BUILD (version, byte order, ...).
// Torch-free.
#include <stdexcept>

#include "trainer/model/weights/pickle_value.h"
#include "trainer/model/weights/raw_tensor.h"

namespace mrcnn::model::weights {

// An array whose element type has no TensorDType (object arrays, strings, structured
// or complex types): not a tensor, so a checkpoint reader skips it instead of failing.
class UnsupportedArrayError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// True when `value` is one of the three records above.
bool IsNumpyArray(const PickleValue& value);

// The array in C order (Fortran-ordered arrays are transposed back), little-endian
// (big-endian data is byte-swapped). Throws UnsupportedArrayError as above, and
// std::runtime_error (without the file: the caller names it and the key) for a malformed
// record: missing state, a shape that is not a tuple of non-negative ints, raw bytes whose
// length is not the shape's element count times the element size.
RawTensor NumpyArrayToRawTensor(const PickleValue& value);

}  // namespace mrcnn::model::weights
