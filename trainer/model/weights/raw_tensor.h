#pragma once
// A tensor as a checkpoint file holds it, before any conversion: element type, shape, and
// its bytes in C order, little-endian. What the pickle and torch.save readers produce and
// the name mapping re-lays out; weights_import.h turns it into a float32 at::Tensor.
// Torch-free.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mrcnn::model::weights {

enum class TensorDType {
  kFloat64,
  kFloat32,
  kFloat16,
  kBFloat16,
  kInt64,
  kInt32,
  kInt16,
  kInt8,
  kUInt8,
  kBool
};

size_t ElementSize(TensorDType dtype);
// "float32", "int64", ... (torch's names without the "torch." prefix; numpy's for float16).
std::string_view DTypeName(TensorDType dtype);
// Numpy's type strings without byte order: "f4", "f8", "f2", "i8", "i4", "i2", "i1", "u1",
// "b1". Anything else (object arrays, strings, complex, unsigned wider than a byte) has no
// TensorDType: nullopt.
std::optional<TensorDType> DTypeFromNumpy(std::string_view kind_and_size);
// torch.FloatStorage, torch.HalfStorage, ... (the storage classes torch.save names).
std::optional<TensorDType> DTypeFromTorchStorage(std::string_view class_name);

struct RawTensor {
  TensorDType dtype = TensorDType::kFloat32;
  std::vector<int64_t> shape;
  std::string bytes;  // ElementSize(dtype) x NumElements(), C order, little-endian

  int64_t NumElements() const;
  // Bytes of one slice along the first dimension (the whole tensor for a 0-d one).
  size_t RowBytes() const;
  // Element i (C order) as a double; for sums and tests.
  double ElementAsDouble(int64_t index) const;
  // The sum of all elements in double precision, in C order.
  double Sum() const;
};

// "[81, 1024]"
std::string ShapeString(const std::vector<int64_t>& shape);

// The number of elements of `shape`; throws std::runtime_error on a negative dimension or
// an element count that overflows int64.
int64_t CheckedNumElements(const std::vector<int64_t>& shape);

// Copies the view (offset, shape, stride: in elements, as torch records them) out of
// `storage` (numel elements of `dtype`) into a C-order RawTensor. Throws
// std::runtime_error when a stride is negative or the view reaches past the storage.
RawTensor CopyStridedView(std::string_view storage, TensorDType dtype, int64_t offset,
                          const std::vector<int64_t>& shape, const std::vector<int64_t>& stride);

// Reverses the byte order of every element (data written big-endian).
void SwapElementBytes(RawTensor& tensor);

}  // namespace mrcnn::model::weights
