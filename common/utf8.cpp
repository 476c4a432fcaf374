#include "common/utf8.h"

#include <cstddef>

namespace mrcnn::common {

size_t Utf8SequenceLength(std::string_view text, size_t pos) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[pos + k]); };
  const unsigned char lead = byte(0);
  size_t length = 0;
  unsigned char second_min = 0x80, second_max = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0)
      second_min = 0xA0;  // overlong
    if (lead == 0xED)
      second_max = 0x9F;  // surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0)
      second_min = 0x90;  // overlong
    if (lead == 0xF4)
      second_max = 0x8F;  // above U+10FFFF
  } else {
    return 0;
  }
  if (pos + length > text.size() || byte(1) < second_min || byte(1) > second_max)
    return 0;
  for (size_t k = 2; k < length; ++k) {
    if ((byte(k) & 0xC0) != 0x80)
      return 0;
  }
  return length;
}

bool IsValidUtf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    if (static_cast<unsigned char>(text[i]) < 0x80) {
      ++i;
      continue;
    }
    const size_t length = Utf8SequenceLength(text, i);
    if (length == 0)
      return false;
    i += length;
  }
  return true;
}

}  // namespace mrcnn::common
