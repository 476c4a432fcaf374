#include "trainer/model/weights/raw_tensor.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace mrcnn::model::weights {

// Files store little-endian data and the loads below read it in place.
static_assert(std::endian::native == std::endian::little, "a little-endian host is assumed");

size_t ElementSize(TensorDType dtype) {
  switch (dtype) {
    case TensorDType::kFloat64:
    case TensorDType::kInt64:
      return 8;
    case TensorDType::kFloat32:
    case TensorDType::kInt32:
      return 4;
    case TensorDType::kFloat16:
    case TensorDType::kBFloat16:
    case TensorDType::kInt16:
      return 2;
    case TensorDType::kInt8:
    case TensorDType::kUInt8:
    case TensorDType::kBool:
      return 1;
  }
  return 1;
}

std::string_view DTypeName(TensorDType dtype) {
  switch (dtype) {
    case TensorDType::kFloat64:
      return "float64";
    case TensorDType::kFloat32:
      return "float32";
    case TensorDType::kFloat16:
      return "float16";
    case TensorDType::kBFloat16:
      return "bfloat16";
    case TensorDType::kInt64:
      return "int64";
    case TensorDType::kInt32:
      return "int32";
    case TensorDType::kInt16:
      return "int16";
    case TensorDType::kInt8:
      return "int8";
    case TensorDType::kUInt8:
      return "uint8";
    case TensorDType::kBool:
      return "bool";
  }
  return "?";
}

std::optional<TensorDType> DTypeFromNumpy(std::string_view kind_and_size) {
  struct Entry {
    std::string_view numpy;
    TensorDType dtype;
  };
  static constexpr Entry kTable[] = {
      {"f8", TensorDType::kFloat64}, {"f4", TensorDType::kFloat32}, {"f2", TensorDType::kFloat16},
      {"i8", TensorDType::kInt64},   {"i4", TensorDType::kInt32},   {"i2", TensorDType::kInt16},
      {"i1", TensorDType::kInt8},    {"u1", TensorDType::kUInt8},   {"b1", TensorDType::kBool},
  };
  for (const auto& entry : kTable) {
    if (entry.numpy == kind_and_size)
      return entry.dtype;
  }
  return std::nullopt;
}

std::optional<TensorDType> DTypeFromTorchStorage(std::string_view class_name) {
  struct Entry {
    std::string_view storage;
    TensorDType dtype;
  };
  static constexpr Entry kTable[] = {
      {"DoubleStorage", TensorDType::kFloat64}, {"FloatStorage", TensorDType::kFloat32},
      {"HalfStorage", TensorDType::kFloat16},   {"BFloat16Storage", TensorDType::kBFloat16},
      {"LongStorage", TensorDType::kInt64},     {"IntStorage", TensorDType::kInt32},
      {"ShortStorage", TensorDType::kInt16},    {"CharStorage", TensorDType::kInt8},
      {"ByteStorage", TensorDType::kUInt8},     {"BoolStorage", TensorDType::kBool},
  };
  for (const auto& entry : kTable) {
    if (entry.storage == class_name)
      return entry.dtype;
  }
  return std::nullopt;
}

int64_t CheckedNumElements(const std::vector<int64_t>& shape) {
  int64_t count = 1;
  bool empty = false;
  for (const int64_t dim : shape) {
    if (dim < 0)
      throw std::runtime_error("shape " + ShapeString(shape) + " has a negative dimension");
    if (dim == 0) {
      empty = true;
    } else if (count > std::numeric_limits<int64_t>::max() / dim) {
      throw std::runtime_error("shape " + ShapeString(shape) +
                               " has more elements than int64 counts");
    } else {
      count *= dim;
    }
  }
  return empty ? 0 : count;
}

int64_t RawTensor::NumElements() const {
  return CheckedNumElements(shape);
}

size_t RawTensor::RowBytes() const {
  if (shape.empty() || shape[0] == 0)
    return bytes.size();
  return bytes.size() / static_cast<size_t>(shape[0]);
}

namespace {

float HalfToFloat(uint16_t half) {
  const uint32_t sign = static_cast<uint32_t>(half & 0x8000) << 16;
  const uint32_t exponent = (half >> 10) & 0x1F;
  uint32_t mantissa = half & 0x3FF;
  uint32_t bits = 0;
  if (exponent == 0x1F) {  // inf, nan
    bits = sign | 0x7F800000 | (mantissa << 13);
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa != 0) {  // subnormal: normalise
    int shift = 0;
    while ((mantissa & 0x400) == 0) {
      mantissa <<= 1;
      ++shift;
    }
    bits = sign | (static_cast<uint32_t>(113 - shift) << 23) | ((mantissa & 0x3FF) << 13);
  } else {
    bits = sign;
  }
  return std::bit_cast<float>(bits);
}

template <typename T>
T Load(const char* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

}  // namespace

double RawTensor::ElementAsDouble(int64_t index) const {
  const char* p = bytes.data() + static_cast<size_t>(index) * ElementSize(dtype);
  switch (dtype) {
    case TensorDType::kFloat64:
      return Load<double>(p);
    case TensorDType::kFloat32:
      return Load<float>(p);
    case TensorDType::kFloat16:
      return HalfToFloat(Load<uint16_t>(p));
    case TensorDType::kBFloat16:
      return std::bit_cast<float>(static_cast<uint32_t>(Load<uint16_t>(p)) << 16);
    case TensorDType::kInt64:
      return static_cast<double>(Load<int64_t>(p));
    case TensorDType::kInt32:
      return Load<int32_t>(p);
    case TensorDType::kInt16:
      return Load<int16_t>(p);
    case TensorDType::kInt8:
      return Load<int8_t>(p);
    case TensorDType::kUInt8:
      return Load<uint8_t>(p);
    case TensorDType::kBool:
      return Load<uint8_t>(p) != 0 ? 1.0 : 0.0;
  }
  return 0.0;
}

double RawTensor::Sum() const {
  double sum = 0.0;
  const int64_t n = static_cast<int64_t>(bytes.size() / ElementSize(dtype));
  for (int64_t i = 0; i < n; ++i)
    sum += ElementAsDouble(i);
  return sum;
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0)
      out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

RawTensor CopyStridedView(std::string_view storage, TensorDType dtype, int64_t offset,
                          const std::vector<int64_t>& shape, const std::vector<int64_t>& stride) {
  if (shape.size() != stride.size()) {
    throw std::runtime_error("shape " + ShapeString(shape) + " and stride " + ShapeString(stride) +
                             " differ in length");
  }
  const size_t element = ElementSize(dtype);
  const auto storage_elements = static_cast<int64_t>(storage.size() / element);
  RawTensor out;
  out.dtype = dtype;
  out.shape = shape;
  const int64_t count = CheckedNumElements(shape);
  if (offset < 0)
    throw std::runtime_error("storage offset " + std::to_string(offset) + " is negative");
  if (count == 0)
    return out;
  // The last element the view reaches must lie inside the storage (every stride >= 0).
  int64_t last = offset;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (stride[d] < 0)
      throw std::runtime_error("stride " + ShapeString(stride) + " has a negative step");
    const int64_t span = shape[d] - 1;
    if (stride[d] != 0 && span > (std::numeric_limits<int64_t>::max() - last) / stride[d])
      throw std::runtime_error("the view reaches past int64 offsets");
    last += span * stride[d];
  }
  if (last >= storage_elements) {
    throw std::runtime_error("the view (offset " + std::to_string(offset) + ", shape " +
                             ShapeString(shape) + ", stride " + ShapeString(stride) +
                             ") reaches element " + std::to_string(last) + " of a storage of " +
                             std::to_string(storage_elements));
  }
  // A view with zero strides (an expanded tensor) has more elements than its storage; one
  // that would copy out more than kMaxBroadcastBytes is refused rather than allocated: no
  // checkpoint holds such a tensor, a hostile file could ask for any size.
  constexpr int64_t kMaxBroadcastBytes = int64_t{256} << 20;
  if (count > storage_elements && count > kMaxBroadcastBytes / static_cast<int64_t>(element)) {
    throw std::runtime_error("the view (shape " + ShapeString(shape) + ", stride " +
                             ShapeString(stride) + ") repeats a storage of " +
                             std::to_string(storage_elements) + " elements past 256 MiB");
  }
  out.bytes.resize(static_cast<size_t>(count) * element);
  // Rows of the innermost dimension are copied whole when they are contiguous (the usual
  // case, so a contiguous tensor is one memcpy per row); otherwise element by element.
  const size_t dims = shape.size();
  const int64_t inner = dims == 0 ? 1 : shape[dims - 1];
  const bool inner_contiguous = dims == 0 || stride[dims - 1] == 1 || inner == 1;
  std::vector<int64_t> index(dims == 0 ? 0 : dims - 1, 0);
  char* dst = out.bytes.data();
  for (int64_t row = 0, rows = count / inner; row < rows; ++row) {
    int64_t base = offset;
    for (size_t d = 0; d + 1 < dims; ++d)
      base += index[d] * stride[d];
    if (inner_contiguous) {
      std::memcpy(dst, storage.data() + static_cast<size_t>(base) * element,
                  static_cast<size_t>(inner) * element);
      dst += static_cast<size_t>(inner) * element;
    } else {
      for (int64_t i = 0; i < inner; ++i) {
        std::memcpy(dst,
                    storage.data() + static_cast<size_t>(base + i * stride[dims - 1]) * element,
                    element);
        dst += element;
      }
    }
    for (size_t d = index.size(); d-- > 0;) {  // next row: odometer over the outer dimensions
      if (++index[d] < shape[d])
        break;
      index[d] = 0;
    }
  }
  return out;
}

void SwapElementBytes(RawTensor& tensor) {
  const size_t element = ElementSize(tensor.dtype);
  for (size_t i = 0; i + element <= tensor.bytes.size(); i += element)
    std::reverse(tensor.bytes.begin() + static_cast<std::ptrdiff_t>(i),
                 tensor.bytes.begin() + static_cast<std::ptrdiff_t>(i + element));
}

}  // namespace mrcnn::model::weights
