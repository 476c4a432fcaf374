#include "trainer/model/weights/tensor_rows.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace mrcnn::model::weights {
namespace {

void NeedRows(const RawTensor& tensor, int64_t rows, const char* operation) {
  if (tensor.shape.empty() || tensor.shape[0] < rows) {
    throw std::invalid_argument(std::string(operation) + " needs " + std::to_string(rows) +
                                " rows, the tensor's shape is " + ShapeString(tensor.shape));
  }
}

std::ptrdiff_t Offset(const RawTensor& tensor, int64_t row) {
  return static_cast<std::ptrdiff_t>(static_cast<size_t>(row) * tensor.RowBytes());
}

}  // namespace

void MoveRow(RawTensor& tensor, int64_t from, int64_t to) {
  NeedRows(tensor, std::max(from, to) + 1, "moving a row");
  auto* data = tensor.bytes.data();
  const std::ptrdiff_t row = static_cast<std::ptrdiff_t>(tensor.RowBytes());
  if (from > to) {  // rows [to, from] rotate right by one row
    std::rotate(data + Offset(tensor, to), data + Offset(tensor, from),
                data + Offset(tensor, from) + row);
  } else if (from < to) {  // rows [from, to] rotate left by one row
    std::rotate(data + Offset(tensor, from), data + Offset(tensor, from) + row,
                data + Offset(tensor, to) + row);
  }
}

void DropLeadingRows(RawTensor& tensor, int64_t count) {
  NeedRows(tensor, count, "dropping leading rows");
  tensor.bytes.erase(0, static_cast<size_t>(Offset(tensor, count)));
  tensor.shape[0] -= count;
}

void PrependZeroRows(RawTensor& tensor, int64_t count) {
  NeedRows(tensor, 0, "adding rows");
  size_t row_bytes = ElementSize(tensor.dtype);  // from the shape: the tensor may have no rows
  for (size_t d = 1; d < tensor.shape.size(); ++d)
    row_bytes *= static_cast<size_t>(tensor.shape[d]);
  tensor.bytes.insert(0, static_cast<size_t>(count) * row_bytes, '\0');
  tensor.shape[0] += count;
}

void RepeatRows(RawTensor& tensor, int64_t times) {
  NeedRows(tensor, 0, "repeating rows");
  if (times < 1)
    throw std::invalid_argument("repeating rows needs a positive count");
  const std::string once = tensor.bytes;
  tensor.bytes.reserve(once.size() * static_cast<size_t>(times));
  for (int64_t i = 1; i < times; ++i)
    tensor.bytes += once;
  tensor.shape[0] *= times;
}

}  // namespace mrcnn::model::weights
