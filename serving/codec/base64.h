#pragma once
// Strict RFC 4648 base64 (standard alphabet). Accepts padded and unpadded input and ignores
// ASCII whitespace (clients wrap lines); rejects any other character, a lone trailing
// character and non-zero padding bits, so a corrupted payload is an error and not an image.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mrcnn::serving {

// nullopt when `text` is not valid base64.
std::optional<std::vector<uint8_t>> DecodeBase64(std::string_view text);

// Decodes into text's own first bytes (no allocation: a large base64 image inside a request
// body becomes its bytes where it lies) and returns their count; nullopt when not valid
// base64, the text then partly overwritten.
std::optional<size_t> DecodeBase64InPlace(std::span<uint8_t> text);

std::string EncodeBase64(const uint8_t* data, size_t size);

}  // namespace mrcnn::serving
