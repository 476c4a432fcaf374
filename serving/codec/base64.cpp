#include "serving/codec/base64.h"

#include <array>
#include <string>

namespace mrcnn::serving {
namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

constexpr std::array<int8_t, 256> MakeDecodeTable() {
  std::array<int8_t, 256> table{};
  table.fill(-1);
  for (int i = 0; i < 64; ++i) {
    table[static_cast<uint8_t>(kAlphabet[i])] = static_cast<int8_t>(i);
  }
  return table;
}
constexpr auto kDecode = MakeDecodeTable();

bool IsSpace(char c) {
  return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

}  // namespace

namespace {

// Writes the bytes to `out` and returns how many. `out` may be text's own first byte: the
// k-th byte is written after at least k + 1 characters were read.
std::optional<size_t> DecodeBase64Into(std::string_view text, uint8_t* out) {
  size_t written = 0;
  uint32_t accumulator = 0;
  int bits = 0;
  int sextets = 0;
  int padding = 0;
  for (char c : text) {
    if (IsSpace(c)) {
      continue;
    }
    if (c == '=') {
      ++padding;
      continue;
    }
    if (padding > 0) {
      return std::nullopt;  // data after padding
    }
    const int8_t value = kDecode[static_cast<uint8_t>(c)];
    if (value < 0) {
      return std::nullopt;
    }
    accumulator = (accumulator << 6) | static_cast<uint32_t>(value);
    bits += 6;
    ++sextets;
    if (bits >= 8) {
      bits -= 8;
      out[written++] = static_cast<uint8_t>((accumulator >> bits) & 0xFF);
    }
  }
  const int tail = sextets % 4;
  if (tail == 1) {
    return std::nullopt;  // 6 bits cannot make a byte
  }
  if (padding > 0 && (padding > 2 || (tail + padding) % 4 != 0)) {
    return std::nullopt;
  }
  if ((accumulator & ((1u << bits) - 1)) != 0) {
    return std::nullopt;  // non-canonical: leftover bits must be zero
  }
  return written;
}

}  // namespace

std::optional<std::vector<uint8_t>> DecodeBase64(std::string_view text) {
  std::vector<uint8_t> out(text.size() / 4 * 3 + 3);
  const auto size = DecodeBase64Into(text, out.data());
  if (!size) {
    return std::nullopt;
  }
  out.resize(*size);
  return out;
}

std::optional<size_t> DecodeBase64InPlace(std::span<uint8_t> text) {
  return DecodeBase64Into(std::string_view(reinterpret_cast<const char*>(text.data()), text.size()),
                          text.data());
}

std::string EncodeBase64(const uint8_t* data, size_t size) {
  // Written through a pointer into the final size: no capacity check per character (bodies
  // of 100 MB+ go through here).
  std::string out((size + 2) / 3 * 4, '=');
  char* dst = out.data();
  size_t i = 0;
  for (; i + 3 <= size; i += 3, dst += 4) {
    const uint32_t v = (uint32_t{data[i]} << 16) | (uint32_t{data[i + 1]} << 8) | data[i + 2];
    dst[0] = kAlphabet[(v >> 18) & 63];
    dst[1] = kAlphabet[(v >> 12) & 63];
    dst[2] = kAlphabet[(v >> 6) & 63];
    dst[3] = kAlphabet[v & 63];
  }
  // The last one or two bytes: two or three characters, the rest stays '='.
  if (size - i >= 1) {
    const uint32_t v = (uint32_t{data[i]} << 16) | (size - i == 2 ? uint32_t{data[i + 1]} << 8 : 0);
    dst[0] = kAlphabet[(v >> 18) & 63];
    dst[1] = kAlphabet[(v >> 12) & 63];
    if (size - i == 2) {
      dst[2] = kAlphabet[(v >> 6) & 63];
    }
  }
  return out;
}

}  // namespace mrcnn::serving
