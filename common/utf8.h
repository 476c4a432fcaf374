#pragma once
// UTF-8 validity (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF), for
// text that is later written out as YAML or JSON: their emitters replace or refuse invalid
// bytes, so such text would not survive a round trip.
#include <cstddef>
#include <string_view>

namespace mrcnn::common {

bool IsValidUtf8(std::string_view text);

// Length of the UTF-8 sequence starting at text[pos] (a byte >= 0x80), or 0 when it is not a
// valid one (cut short, overlong, a surrogate, above U+10FFFF, a bad continuation byte).
size_t Utf8SequenceLength(std::string_view text, size_t pos);

}  // namespace mrcnn::common
