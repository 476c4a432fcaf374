#pragma once
// The Torch-free half of reading a safetensors file (safetensors.h): the 8-byte
// little-endian header length and the JSON header, checked against the bytes that follow.
// Torch-free so that the untrusted part of loading weights is fuzzed on its own
// (test/fuzz/fuzz_safetensors_header.cpp).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mrcnn::model {

struct SafetensorsEntry {
  std::string key;
  std::string dtype;  // one of F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL
  size_t element_size = 0;
  std::vector<int64_t> shape;
  // Byte range in the data area: end - begin == element_size x the product of shape.
  uint64_t begin = 0;
  uint64_t end = 0;
};

struct SafetensorsHeader {
  uint64_t data_offset = 0;               // where the data area starts: 8 + header length
  std::vector<SafetensorsEntry> entries;  // sorted by key; "__metadata__" is not an entry
};

// Rejects (std::runtime_error naming `source`, and the key where there is one): input
// shorter than 8 bytes, a header length past the end, a header that is not a JSON object,
// entries without dtype/shape/data_offsets, unknown dtypes, dimensions that are not
// unsigned integers, a shape whose element count (of its non-zero dimensions) overflows
// int64, offsets outside the data area or disagreeing with dtype x shape, and overlapping
// tensors.
SafetensorsHeader ParseSafetensorsHeader(std::string_view bytes, const std::string& source);

}  // namespace mrcnn::model
