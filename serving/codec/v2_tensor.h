#pragma once
// The tensors of the Open Inference Protocol (KServe V2, also Triton's and MLServer's): its
// datatype names, element counts, and the binary tensor extension's layout of BYTES tensors
// (each element a 4-byte little-endian length, then that many bytes, as Triton writes
// them). Pure functions; every rejection is an HttpError 400 naming the tensor.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mrcnn::serving {

enum class V2Datatype {
  kBool,
  kUint8,
  kUint16,
  kUint32,
  kUint64,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kFp16,
  kFp32,
  kFp64,
  kBytes,
};

// "FP32" -> kFp32 (exact spelling, as the protocol writes them); nullopt for anything else.
std::optional<V2Datatype> ParseV2Datatype(std::string_view name);
std::string_view V2DatatypeName(V2Datatype datatype);
// Bytes per element in the binary extension; 0 for BYTES (variable length).
size_t V2ElementSize(V2Datatype datatype);

// The product of a shape. Throws HttpError 400 naming `tensor` for a negative dimension or a
// product beyond 2^40 (no request of this server holds that many elements).
int64_t V2ElementCount(const std::vector<int64_t>& shape, std::string_view tensor);

// A binary BYTES tensor's elements (spans into `data`). Throws HttpError 400 naming `tensor`
// when `data` does not hold exactly `count` length-prefixed elements (a truncated length or
// element, or bytes left over).
std::vector<std::span<const uint8_t>> SplitV2BytesElements(std::span<const uint8_t> data,
                                                           int64_t count, std::string_view tensor);

// Appends one element in that layout.
void AppendV2BytesElement(std::string& out, std::string_view element);

}  // namespace mrcnn::serving
