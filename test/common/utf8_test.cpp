#include "common/utf8.h"

#include <catch2/catch.hpp>
#include <string>

using mrcnn::common::IsValidUtf8;

TEST_CASE("UTF-8: well-formed sequences of every length pass, malformed ones fail", "[utf8]") {
  CHECK(IsValidUtf8(""));
  CHECK(IsValidUtf8("plain ascii"));
  CHECK(IsValidUtf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf"));
  CHECK_FALSE(IsValidUtf8("caf\xe9"));                      // Latin-1
  CHECK_FALSE(IsValidUtf8("\xc0\xaf"));                     // overlong '/'
  CHECK_FALSE(IsValidUtf8("\xe0\x80\xaf"));                 // overlong, 3 bytes
  CHECK_FALSE(IsValidUtf8("\xed\xa0\x80"));                 // surrogate U+D800
  CHECK_FALSE(IsValidUtf8("\xf4\x90\x80\x80"));             // above U+10FFFF
  CHECK_FALSE(IsValidUtf8("\xe2\x82"));                     // truncated
  CHECK_FALSE(IsValidUtf8(std::string("\xe2\x82") + "a"));  // continuation missing
  CHECK_FALSE(IsValidUtf8("\x80"));                         // lone continuation byte
}
