// libFuzzer target over the untrusted half of loading weights (trainer/model/
// safetensors_header.h): the header length, the JSON header and its checks against the
// data that follows. std::runtime_error is the expected rejection; any other exception, a
// crash, a sanitizer report, or an accepted entry whose bytes lie outside the input or
// disagree with its dtype and shape is a finding.
#include <cstdlib>
#include <stdexcept>
#include <string_view>

#include "trainer/model/safetensors_header.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    const auto header = mrcnn::model::ParseSafetensorsHeader(bytes, "model.safetensors");
    for (const auto& entry : header.entries) {
      uint64_t elements = 1;
      for (const int64_t dim : entry.shape) {
        if (dim < 0)
          std::abort();
        elements *= static_cast<uint64_t>(dim);
      }
      if (entry.begin > entry.end || header.data_offset + entry.end > size ||
          entry.end - entry.begin != elements * entry.element_size) {
        std::abort();
      }
    }
  } catch (const std::runtime_error&) {
  }
  return 0;
}
