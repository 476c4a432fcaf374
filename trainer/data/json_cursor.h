#pragma once
// A pull reader over JSON text held in memory: the caller walks the document it expects
// (objects by member, arrays by element) and skips the rest, so large COCO files are read
// without building a DOM. Syntax errors, and strings that are not valid UTF-8 (raw bytes or
// a \u escape of an unpaired surrogate), throw std::runtime_error with "source:line:col".
#include <charconv>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace mrcnn::data {

class JsonCursor {
 public:
  enum class Kind { kObject, kArray, kString, kNumber, kTrue, kFalse, kNull };

  JsonCursor(std::string_view text, std::string source) : text_(text), source_(std::move(source)) {}

  // Kind of the next value (skips whitespace); throws at end of input or a bad character.
  Kind Peek();
  static const char* KindName(Kind kind);

  // Calls member(key) for each member; member must consume the value (read or Skip()).
  template <typename F>
  void ForEachMember(F&& member);
  // Calls element(index) for each element; element must consume the value.
  template <typename F>
  void ForEachElement(F&& element);

  // String value. The view points into the text when there are no escapes, else into
  // *scratch (valid until the next call using the same scratch).
  std::string_view String(std::string* scratch);
  double Number();
  // An integral number (1 and 1.0 both accepted); throws for a fraction.
  int64_t Integer();
  bool Bool();
  void Skip();
  // Asserts that only whitespace remains.
  void ExpectEnd();

  size_t offset() const { return pos_; }
  // "source:line:column" of a byte offset.
  std::string Where(size_t offset) const;
  [[noreturn]] void Fail(const std::string& what) const { FailAt(pos_, what); }
  [[noreturn]] void FailAt(size_t offset, const std::string& what) const;

 private:
  void SkipSpace() {
    while (pos_ < text_.size()) {
      char c = text_[pos_];
      if (c != ' ' && c != '\n' && c != '\r' && c != '\t')
        return;
      ++pos_;
    }
  }
  void Expect(char c);
  // The four hex digits of a \u escape at pos_.
  uint32_t Hex4();
  // The escape whose backslash was just read (pos_ at the character after it), appended to
  // `out` decoded.
  void AppendEscape(std::string* out);
  std::string_view NumberToken();
  void SkipString();

  std::string_view text_;
  std::string source_;
  size_t pos_ = 0;
  std::string key_scratch_;
  int depth_ = 0;
};

template <typename F>
void JsonCursor::ForEachMember(F&& member) {
  SkipSpace();
  Expect('{');
  if (++depth_ > 512)
    Fail("nesting deeper than 512 levels");
  SkipSpace();
  if (pos_ < text_.size() && text_[pos_] == '}') {
    ++pos_;
    --depth_;
    return;
  }
  while (true) {
    SkipSpace();
    if (pos_ >= text_.size() || text_[pos_] != '"')
      Fail("expected a member name in quotes");
    std::string_view key = String(&key_scratch_);
    // The key may live in key_scratch_, which a nested object would overwrite.
    std::string owned;
    if (!key_scratch_.empty() && key.data() == key_scratch_.data()) {
      owned = std::string(key);
      key = owned;
    }
    SkipSpace();
    Expect(':');
    member(key);
    SkipSpace();
    if (pos_ >= text_.size())
      Fail("unexpected end of input inside an object");
    char c = text_[pos_++];
    if (c == '}')
      break;
    if (c != ',')
      FailAt(pos_ - 1, "expected ',' or '}' after an object member");
  }
  --depth_;
}

template <typename F>
void JsonCursor::ForEachElement(F&& element) {
  SkipSpace();
  Expect('[');
  if (++depth_ > 512)
    Fail("nesting deeper than 512 levels");
  SkipSpace();
  if (pos_ < text_.size() && text_[pos_] == ']') {
    ++pos_;
    --depth_;
    return;
  }
  size_t index = 0;
  while (true) {
    element(index++);
    SkipSpace();
    if (pos_ >= text_.size())
      Fail("unexpected end of input inside an array");
    char c = text_[pos_++];
    if (c == ']')
      break;
    if (c != ',')
      FailAt(pos_ - 1, "expected ',' or ']' after an array element");
  }
  --depth_;
}

}  // namespace mrcnn::data
