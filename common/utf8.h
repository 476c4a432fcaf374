#pragma once
// UTF-8 validity (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF), for
// text that is later written out as YAML or JSON: their emitters replace or refuse invalid
// bytes, so such text would not survive a round trip.
#include <string_view>

namespace mrcnn::common {

bool IsValidUtf8(std::string_view text);

}  // namespace mrcnn::common
