#include "common/utf8.h"

#include <cstddef>

namespace mrcnn::common {

bool IsValidUtf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[i + k]); };
    const unsigned char lead = byte(0);
    if (lead < 0x80) {
      ++i;
      continue;
    }
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
      return false;
    }
    if (i + length > text.size() || byte(1) < second_min || byte(1) > second_max)
      return false;
    for (size_t k = 2; k < length; ++k) {
      if ((byte(k) & 0xC0) != 0x80)
        return false;
    }
    i += length;
  }
  return true;
}

}  // namespace mrcnn::common
