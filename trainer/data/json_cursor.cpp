#include "trainer/data/json_cursor.h"

#include <cmath>

#include "common/utf8.h"

namespace mrcnn::data {

const char* JsonCursor::KindName(Kind kind) {
  switch (kind) {
    case Kind::kObject:
      return "an object";
    case Kind::kArray:
      return "an array";
    case Kind::kString:
      return "a string";
    case Kind::kNumber:
      return "a number";
    case Kind::kTrue:
    case Kind::kFalse:
      return "a boolean";
    case Kind::kNull:
      return "null";
  }
  return "?";
}

std::string JsonCursor::Where(size_t offset) const {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < offset && i < text_.size(); ++i) {
    if (text_[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return source_ + ":" + std::to_string(line) + ":" + std::to_string(col);
}

void JsonCursor::FailAt(size_t offset, const std::string& what) const {
  throw std::runtime_error(Where(offset) + ": malformed JSON: " + what);
}

void JsonCursor::Expect(char c) {
  if (pos_ >= text_.size())
    Fail(std::string("unexpected end of input, expected '") + c + "'");
  if (text_[pos_] != c)
    Fail(std::string("expected '") + c + "'");
  ++pos_;
}

JsonCursor::Kind JsonCursor::Peek() {
  SkipSpace();
  if (pos_ >= text_.size())
    Fail("unexpected end of input, expected a value");
  switch (text_[pos_]) {
    case '{':
      return Kind::kObject;
    case '[':
      return Kind::kArray;
    case '"':
      return Kind::kString;
    case 't':
      return Kind::kTrue;
    case 'f':
      return Kind::kFalse;
    case 'n':
      return Kind::kNull;
    default:
      break;
  }
  char c = text_[pos_];
  if (c == '-' || (c >= '0' && c <= '9'))
    return Kind::kNumber;
  Fail(std::string("unexpected character '") + c + "'");
}

namespace {
void AppendUtf8(std::string* out, uint32_t cp) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// Strings must be valid UTF-8 (common::Utf8SequenceLength): Python's json, which
// pycocotools uses, refuses such a file; let through, a name in it would make every JSON
// written from it (classes.json, evaluation reports) throw.
using common::Utf8SequenceLength;

}  // namespace

uint32_t JsonCursor::Hex4() {
  if (pos_ + 4 > text_.size())
    Fail("truncated \\u escape");
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) {
    char h = text_[pos_++];
    v <<= 4;
    if (h >= '0' && h <= '9') {
      v |= static_cast<uint32_t>(h - '0');
    } else if (h >= 'a' && h <= 'f') {
      v |= static_cast<uint32_t>(h - 'a' + 10);
    } else if (h >= 'A' && h <= 'F') {
      v |= static_cast<uint32_t>(h - 'A' + 10);
    } else {
      Fail("bad hex digit in \\u escape");
    }
  }
  return v;
}

void JsonCursor::AppendEscape(std::string* out) {
  if (pos_ >= text_.size())
    Fail("unterminated escape");
  char e = text_[pos_++];
  switch (e) {
    case '"':
    case '\\':
    case '/':
      out->push_back(e);
      break;
    case 'b':
      out->push_back('\b');
      break;
    case 'f':
      out->push_back('\f');
      break;
    case 'n':
      out->push_back('\n');
      break;
    case 'r':
      out->push_back('\r');
      break;
    case 't':
      out->push_back('\t');
      break;
    case 'u': {
      const size_t escape = pos_ - 2;
      uint32_t cp = Hex4();
      if (cp >= 0xD800 && cp < 0xDC00 && pos_ + 1 < text_.size() && text_[pos_] == '\\' &&
          text_[pos_ + 1] == 'u') {
        pos_ += 2;
        const uint32_t lo = Hex4();
        if (lo < 0xDC00 || lo >= 0xE000)
          FailAt(escape, "\\u escape of a surrogate without its pair (not a character)");
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
      }
      // Encoded as UTF-8 a lone surrogate is not valid UTF-8 either (see Utf8SequenceLength).
      if (cp >= 0xD800 && cp < 0xE000)
        FailAt(escape, "\\u escape of a surrogate without its pair (not a character)");
      AppendUtf8(out, cp);
      break;
    }
    default:
      FailAt(pos_ - 1, std::string("unknown escape '\\") + e + "'");
  }
}

std::string_view JsonCursor::String(std::string* scratch) {
  SkipSpace();
  Expect('"');
  const size_t start = pos_;
  // Fast path: no escapes.
  while (pos_ < text_.size()) {
    char c = text_[pos_];
    if (c == '"') {
      ++pos_;
      if (scratch)
        scratch->clear();
      return text_.substr(start, pos_ - 1 - start);
    }
    if (c == '\\')
      break;
    if (static_cast<unsigned char>(c) < 0x20)
      Fail("control character inside a string");
    if (static_cast<unsigned char>(c) >= 0x80) {
      const size_t length = Utf8SequenceLength(text_, pos_);
      if (length == 0)
        Fail("invalid UTF-8 inside a string (the file must be UTF-8)");
      pos_ += length;
      continue;
    }
    ++pos_;
  }
  if (pos_ >= text_.size())
    FailAt(start - 1, "unterminated string");
  std::string local;
  std::string* out = scratch ? scratch : &local;
  out->assign(text_.substr(start, pos_ - start));
  while (true) {
    if (pos_ >= text_.size())
      FailAt(start - 1, "unterminated string");
    char c = text_[pos_++];
    if (c == '"')
      break;
    if (static_cast<unsigned char>(c) < 0x20)
      Fail("control character inside a string");
    if (static_cast<unsigned char>(c) >= 0x80) {
      const size_t length = Utf8SequenceLength(text_, pos_ - 1);
      if (length == 0)
        FailAt(pos_ - 1, "invalid UTF-8 inside a string (the file must be UTF-8)");
      out->append(text_.substr(pos_ - 1, length));
      pos_ += length - 1;
      continue;
    }
    if (c != '\\') {
      out->push_back(c);
      continue;
    }
    AppendEscape(out);
  }
  if (out == &local) {
    // No scratch: the caller only wanted to validate/skip.
    return {};
  }
  return *out;
}

std::string_view JsonCursor::NumberToken() {
  SkipSpace();
  const size_t start = pos_;
  auto digits = [&]() {
    size_t n = 0;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      ++pos_;
      ++n;
    }
    return n;
  };
  if (pos_ < text_.size() && text_[pos_] == '-')
    ++pos_;
  if (digits() == 0)
    FailAt(start, "expected a number");
  if (pos_ < text_.size() && text_[pos_] == '.') {
    ++pos_;
    if (digits() == 0)
      FailAt(start, "expected digits after '.'");
  }
  if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
    ++pos_;
    if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-'))
      ++pos_;
    if (digits() == 0)
      FailAt(start, "expected digits in the exponent");
  }
  return text_.substr(start, pos_ - start);
}

double JsonCursor::Number() {
  if (Peek() != Kind::kNumber)
    Fail("expected a number");
  const size_t start = pos_;
  std::string_view tok = NumberToken();
  double v = 0;
  auto r = std::from_chars(tok.data(), tok.data() + tok.size(), v);
  if (r.ec == std::errc::result_out_of_range) {
    // Overflow to +-inf like Python's json; underflow to 0.
    v = std::strtod(std::string(tok).c_str(), nullptr);
  } else if (r.ec != std::errc() || r.ptr != tok.data() + tok.size()) {
    FailAt(start, "bad number");
  }
  return v;
}

int64_t JsonCursor::Integer() {
  if (Peek() != Kind::kNumber)
    Fail("expected an integer");
  const size_t start = pos_;
  std::string_view tok = NumberToken();
  int64_t v = 0;
  auto r = std::from_chars(tok.data(), tok.data() + tok.size(), v);
  if (r.ec == std::errc() && r.ptr == tok.data() + tok.size())
    return v;
  double d = 0;
  auto rd = std::from_chars(tok.data(), tok.data() + tok.size(), d);
  if (rd.ec != std::errc() || std::floor(d) != d || std::fabs(d) > 9.007199254740992e15) {
    FailAt(start, "expected an integer, found " + std::string(tok));
  }
  return static_cast<int64_t>(d);
}

bool JsonCursor::Bool() {
  Kind k = Peek();
  if (k == Kind::kTrue && text_.substr(pos_, 4) == "true") {
    pos_ += 4;
    return true;
  }
  if (k == Kind::kFalse && text_.substr(pos_, 5) == "false") {
    pos_ += 5;
    return false;
  }
  Fail("expected true or false");
}

void JsonCursor::SkipString() {
  String(nullptr);
}

void JsonCursor::Skip() {
  switch (Peek()) {
    case Kind::kObject:
      ForEachMember([&](std::string_view) { Skip(); });
      return;
    case Kind::kArray:
      ForEachElement([&](size_t) { Skip(); });
      return;
    case Kind::kString:
      SkipString();
      return;
    case Kind::kNumber:
      NumberToken();
      return;
    case Kind::kTrue:
    case Kind::kFalse:
      Bool();
      return;
    case Kind::kNull:
      if (text_.substr(pos_, 4) != "null")
        Fail("expected null");
      pos_ += 4;
      return;
  }
}

void JsonCursor::ExpectEnd() {
  SkipSpace();
  if (pos_ != text_.size())
    Fail("unexpected content after the top-level value");
}

}  // namespace mrcnn::data
