#include "trainer/model/weights/numpy_array.h"

#include <string>
#include <vector>

namespace mrcnn::model::weights {
namespace {

using Kind = PickleValue::Kind;

bool IsNumpyCall(const PickleValue& value, std::string_view submodule, std::string_view name) {
  if (!value.Is(Kind::kObject) || value.Name() != name)
    return false;
  const std::string& module = value.Module();
  return module == "numpy.core." + std::string(submodule) ||
         module == "numpy._core." + std::string(submodule);
}

bool IsReconstruct(const PickleValue& v) {
  return IsNumpyCall(v, "multiarray", "_reconstruct");
}
bool IsFromBuffer(const PickleValue& v) {
  return IsNumpyCall(v, "numeric", "_frombuffer");
}
bool IsScalar(const PickleValue& v) {
  return IsNumpyCall(v, "multiarray", "scalar");
}

const std::vector<PickleValue>& TupleItems(const PickleValue& value, const char* what) {
  if (!value.Is(Kind::kTuple))
    throw std::runtime_error(std::string(what) + " is a " + value.Describe() + ", not a tuple");
  return value.Items();
}

struct NumpyDType {
  TensorDType dtype;
  bool big_endian = false;
};

NumpyDType ReadDType(const PickleValue& value) {
  if (!value.Is(Kind::kObject) || value.Name() != "dtype" ||
      (value.Module() != "numpy" && value.Module() != "numpy.core.multiarray" &&
       value.Module() != "numpy._core.multiarray")) {
    throw std::runtime_error("the dtype is a " + value.Describe() + ", not numpy.dtype(...)");
  }
  const auto& args = TupleItems(value.Args(), "numpy.dtype's arguments");
  if (args.empty() || !args[0].IsText())
    throw std::runtime_error("numpy.dtype(...) has no type string");
  std::string typestr = args[0].AsText();
  NumpyDType out{};
  if (!typestr.empty() &&
      (typestr[0] == '<' || typestr[0] == '>' || typestr[0] == '|' || typestr[0] == '=')) {
    out.big_endian = typestr[0] == '>';
    typestr.erase(0, 1);
  }
  // numpy writes "f4", "i8", ...; the one-letter aliases numpy also accepts for bool/uint8.
  if (typestr == "?" || typestr == "b1")
    typestr = "b1";
  const auto dtype = DTypeFromNumpy(typestr);
  if (!dtype)
    throw UnsupportedArrayError("numpy dtype '" + typestr + "' is not a tensor element type");
  out.dtype = *dtype;
  if (value.HasState() && value.State().Is(Kind::kTuple)) {
    // (version, byte order, subarray, names, fields, elsize, alignment, flags[, metadata])
    const auto& state = value.State().Items();
    if (state.size() >= 2 && state[1].IsText()) {
      const std::string order = state[1].AsText();
      out.big_endian = order == ">";
    }
    if (state.size() >= 5 && (!state[2].IsNone() || !state[3].IsNone() || !state[4].IsNone()))
      throw UnsupportedArrayError(
          "a structured or sub-array numpy dtype is not a tensor element type");
  }
  return out;
}

std::vector<int64_t> ReadShape(const PickleValue& value) {
  std::vector<int64_t> shape;
  for (const PickleValue& dim : TupleItems(value, "the shape")) {
    if (!dim.Is(Kind::kInt) || dim.AsInt() < 0)
      throw std::runtime_error("the shape holds " + dim.Describe() + ", not a dimension");
    shape.push_back(dim.AsInt());
  }
  return shape;
}

RawTensor FromRawBytes(std::string_view data, const NumpyDType& dtype, std::vector<int64_t> shape,
                       bool fortran_order) {
  const int64_t count = CheckedNumElements(shape);
  const size_t element = ElementSize(dtype.dtype);
  if (static_cast<uint64_t>(count) > data.size() / element ||
      static_cast<size_t>(count) * element != data.size()) {
    throw std::runtime_error("the array's raw data has " + std::to_string(data.size()) +
                             " bytes, its shape " + ShapeString(shape) + " needs " +
                             std::to_string(static_cast<uint64_t>(count)) + " elements of " +
                             std::to_string(element));
  }
  RawTensor tensor;
  if (fortran_order && shape.size() > 1) {
    std::vector<int64_t> stride(shape.size());
    int64_t step = 1;
    for (size_t d = 0; d < shape.size(); ++d) {
      stride[d] = step;
      step *= shape[d] == 0 ? 1 : shape[d];
    }
    tensor = CopyStridedView(data, dtype.dtype, 0, shape, stride);
  } else {
    tensor.dtype = dtype.dtype;
    tensor.shape = std::move(shape);
    tensor.bytes.assign(data);
  }
  if (dtype.big_endian)
    SwapElementBytes(tensor);
  return tensor;
}

std::string_view ReadData(const PickleValue& value) {
  if (value.Is(Kind::kList))
    throw UnsupportedArrayError("an object array (its data is a list) is not a tensor");
  if (!value.Is(Kind::kBytes))
    throw std::runtime_error("the array's data is a " + value.Describe() + ", not bytes");
  return value.AsBytes();
}

}  // namespace

bool IsNumpyArray(const PickleValue& value) {
  return IsReconstruct(value) || IsFromBuffer(value) || IsScalar(value);
}

RawTensor NumpyArrayToRawTensor(const PickleValue& value) {
  if (IsReconstruct(value)) {
    if (!value.HasState())
      throw std::runtime_error("numpy _reconstruct(...) was never given its state (no BUILD)");
    auto state = TupleItems(value.State(), "the array's state");
    // (version, shape, dtype, is_fortran, data); numpy before 1.0 left out the version.
    if (state.size() == 5)
      state.erase(state.begin());
    if (state.size() != 4)
      throw std::runtime_error("the array's state has " + std::to_string(state.size()) +
                               " items, not 5");
    const NumpyDType dtype = ReadDType(state[1]);
    const bool fortran = state[2].Is(Kind::kBool) ? state[2].AsBool() : state[2].AsInt() != 0;
    return FromRawBytes(ReadData(state[3]), dtype, ReadShape(state[0]), fortran);
  }
  if (IsFromBuffer(value)) {
    const auto& args = TupleItems(value.Args(), "_frombuffer's arguments");
    if (args.size() != 4)
      throw std::runtime_error("numpy _frombuffer(...) has " + std::to_string(args.size()) +
                               " arguments, not 4");
    const NumpyDType dtype = ReadDType(args[1]);
    const bool fortran = args[3].IsText() && args[3].AsText() == "F";
    return FromRawBytes(ReadData(args[0]), dtype, ReadShape(args[2]), fortran);
  }
  if (IsScalar(value)) {
    const auto& args = TupleItems(value.Args(), "scalar's arguments");
    if (args.size() != 2)
      throw std::runtime_error("numpy scalar(...) has " + std::to_string(args.size()) +
                               " arguments, not 2");
    return FromRawBytes(ReadData(args[1]), ReadDType(args[0]), {}, false);
  }
  throw std::runtime_error(value.Describe() + " is not a numpy array");
}

}  // namespace mrcnn::model::weights
