#include "serving/codec/v2_tensor.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <utility>

#include "serving/http/http_error.h"

namespace mrcnn::serving {
namespace {

struct DatatypeInfo {
  V2Datatype datatype;
  std::string_view name;
  size_t size;
};

constexpr std::array<DatatypeInfo, 13> kDatatypes{{
    {V2Datatype::kBool, "BOOL", 1},
    {V2Datatype::kUint8, "UINT8", 1},
    {V2Datatype::kUint16, "UINT16", 2},
    {V2Datatype::kUint32, "UINT32", 4},
    {V2Datatype::kUint64, "UINT64", 8},
    {V2Datatype::kInt8, "INT8", 1},
    {V2Datatype::kInt16, "INT16", 2},
    {V2Datatype::kInt32, "INT32", 4},
    {V2Datatype::kInt64, "INT64", 8},
    {V2Datatype::kFp16, "FP16", 2},
    {V2Datatype::kFp32, "FP32", 4},
    {V2Datatype::kFp64, "FP64", 8},
    {V2Datatype::kBytes, "BYTES", 0},
}};

const DatatypeInfo& Info(V2Datatype datatype) {
  return kDatatypes.at(static_cast<size_t>(datatype));
}

constexpr int64_t kMaxElements = int64_t{1} << 40;

HttpError BadTensor(std::string_view tensor, const std::string& what) {
  return HttpError(400, "bad_request", fmt::format("input \"{}\": {}", tensor, what));
}

}  // namespace

std::optional<V2Datatype> ParseV2Datatype(std::string_view name) {
  for (const DatatypeInfo& info : kDatatypes) {
    if (info.name == name) {
      return info.datatype;
    }
  }
  return std::nullopt;
}

std::string_view V2DatatypeName(V2Datatype datatype) {
  return Info(datatype).name;
}

size_t V2ElementSize(V2Datatype datatype) {
  return Info(datatype).size;
}

int64_t V2ElementCount(const std::vector<int64_t>& shape, std::string_view tensor) {
  int64_t count = 1;
  for (const int64_t dimension : shape) {
    if (dimension < 0) {
      throw BadTensor(tensor,
                      fmt::format("shape [{}] has a negative dimension", fmt::join(shape, ", ")));
    }
    if (dimension != 0 && count > kMaxElements / dimension) {
      throw BadTensor(tensor,
                      fmt::format("shape [{}] has too many elements", fmt::join(shape, ", ")));
    }
    count *= dimension;
  }
  return count;
}

std::vector<std::span<const uint8_t>> SplitV2BytesElements(std::span<const uint8_t> data,
                                                           int64_t count, std::string_view tensor) {
  std::vector<std::span<const uint8_t>> elements;
  size_t at = 0;
  for (int64_t i = 0; i < count; ++i) {
    if (data.size() - at < 4) {
      throw BadTensor(tensor, fmt::format("binary data ends inside the length of element {} of "
                                          "{} (each BYTES element is a 4-byte little-endian "
                                          "length, then its bytes)",
                                          i, count));
    }
    const size_t length = size_t{data[at]} | size_t{data[at + 1]} << 8 |
                          size_t{data[at + 2]} << 16 | size_t{data[at + 3]} << 24;
    at += 4;
    if (data.size() - at < length) {
      throw BadTensor(tensor, fmt::format("element {} of {} says {} bytes, but only {} follow", i,
                                          count, length, data.size() - at));
    }
    elements.push_back(data.subspan(at, length));
    at += length;
  }
  if (at != data.size()) {
    throw BadTensor(tensor, fmt::format("{} bytes follow its {} BYTES element(s): the shape and "
                                        "binary_data_size disagree",
                                        data.size() - at, count));
  }
  return elements;
}

void AppendV2BytesElement(std::string& out, std::string_view element) {
  const auto length = static_cast<uint32_t>(element.size());
  for (int shift = 0; shift < 32; shift += 8) {
    out.push_back(static_cast<char>((length >> shift) & 0xFF));
  }
  out.append(element);
}

}  // namespace mrcnn::serving
