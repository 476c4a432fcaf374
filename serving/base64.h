#pragma once
// Strict RFC 4648 base64 (standard alphabet). Accepts padded and unpadded input and ignores
// ASCII whitespace (clients wrap lines); rejects any other character, a lone trailing
// character and non-zero padding bits, so a corrupted payload is an error and not an image.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mrcnn::serving {

// nullopt when `text` is not valid base64.
std::optional<std::vector<uint8_t>> DecodeBase64(std::string_view text);

std::string EncodeBase64(const uint8_t* data, size_t size);

}  // namespace mrcnn::serving
