#include "trainer/model/safetensors_header.h"

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <utility>

namespace mrcnn::model {
namespace {

struct DtypeSize {
  const char* name;
  size_t size;
};

constexpr DtypeSize kDtypeSizes[] = {
    {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8},
    {"I32", 4}, {"I16", 2}, {"I8", 1},  {"U8", 1},   {"BOOL", 1},
};

size_t ElementSize(const std::string& name, const std::string& source, const std::string& key) {
  for (const auto& d : kDtypeSizes) {
    if (name == d.name)
      return d.size;
  }
  throw std::runtime_error(source + ": tensor '" + key + "' has unknown dtype '" + name +
                           "' (supported: F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL)");
}

[[noreturn]] void Malformed(const std::string& source, const std::string& why) {
  throw std::runtime_error(source + ": malformed safetensors file: " + why);
}

}  // namespace

SafetensorsHeader ParseSafetensorsHeader(std::string_view bytes, const std::string& source) {
  if (bytes.size() < 8)
    Malformed(source, "shorter than the 8-byte header length");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i)
    header_len = (header_len << 8) | static_cast<uint8_t>(bytes[static_cast<size_t>(i)]);
  if (header_len > bytes.size() - 8) {
    Malformed(source, "header length " + std::to_string(header_len) + " exceeds the file size " +
                          std::to_string(bytes.size()) + " (truncated file?)");
  }
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes.substr(8, header_len));
  } catch (const nlohmann::json::exception& e) {
    Malformed(source, std::string("header is not valid JSON (") + e.what() + ")");
  }
  if (!header.is_object())
    Malformed(source, "header is not a JSON object");
  SafetensorsHeader out;
  out.data_offset = 8 + header_len;
  const uint64_t data_size = bytes.size() - out.data_offset;

  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const auto& [key, entry] : header.items()) {
    if (key == "__metadata__")
      continue;
    if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") ||
        !entry.contains("data_offsets")) {
      Malformed(source, "entry '" + key + "' needs dtype, shape and data_offsets");
    }
    if (!entry["dtype"].is_string() || !entry["shape"].is_array() ||
        !entry["data_offsets"].is_array() || entry["data_offsets"].size() != 2) {
      Malformed(source, "entry '" + key + "' has a wrongly typed dtype, shape or data_offsets");
    }
    SafetensorsEntry parsed;
    parsed.key = key;
    parsed.dtype = entry["dtype"].get<std::string>();
    parsed.element_size = ElementSize(parsed.dtype, source, key);
    // Torch sizes are int64 and so are the strides of a contiguous tensor, which multiply the
    // non-zero dimensions; a shape with a zero dimension holds no bytes.
    uint64_t nonzero_numel = 1;
    bool empty = false;
    for (const auto& dim : entry["shape"]) {
      if (!dim.is_number_unsigned())
        Malformed(source, "entry '" + key + "' has a negative or non-integer dimension");
      const uint64_t size = dim.get<uint64_t>();
      if (size == 0) {
        empty = true;
      } else if (__builtin_mul_overflow(nonzero_numel, size, &nonzero_numel) ||
                 nonzero_numel > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        Malformed(source, "entry '" + key + "' has a shape of more than 2^63 elements");
      }
      parsed.shape.push_back(static_cast<int64_t>(size));
    }
    const auto& offsets = entry["data_offsets"];
    if (!offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned()) {
      Malformed(source, "entry '" + key + "' has non-integer data_offsets");
    }
    parsed.begin = offsets[0].get<uint64_t>();
    parsed.end = offsets[1].get<uint64_t>();
    if (parsed.begin > parsed.end || parsed.end > data_size) {
      Malformed(source, "entry '" + key + "' has data_offsets [" + std::to_string(parsed.begin) +
                            ", " + std::to_string(parsed.end) + "] outside the data area of " +
                            std::to_string(data_size) + " bytes (truncated file?)");
    }
    uint64_t expected = 0;
    if (!empty && __builtin_mul_overflow(nonzero_numel, parsed.element_size, &expected)) {
      expected = std::numeric_limits<uint64_t>::max();  // more than any data area
    }
    if (parsed.end - parsed.begin != expected) {
      Malformed(source, "entry '" + key + "' spans " + std::to_string(parsed.end - parsed.begin) +
                            " bytes but dtype x shape needs " + std::to_string(expected));
    }
    ranges.emplace_back(parsed.begin, parsed.end);
    out.entries.push_back(std::move(parsed));
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].first < ranges[i - 1].second)
      Malformed(source, "two tensors overlap in the data area");
  }
  return out;
}

}  // namespace mrcnn::model
