#include "serving/codec/json_lines_decoding.h"

#include <fmt/format.h>

#include <stdexcept>
#include <string>

#include "serving/codec/base64.h"
#include "trainer/data/json_cursor.h"

namespace mrcnn::serving {
namespace {

constexpr std::string_view kRecordForms =
    "{\"image\": \"<base64 JPEG or PNG>\", \"id\": <optional, any JSON>} or a base64 string";

bool IsBlank(std::string_view text) {
  return text.find_first_not_of(" \t\r") == std::string_view::npos;
}

}  // namespace

std::vector<std::span<uint8_t>> SplitJsonLines(std::span<uint8_t> body) {
  std::vector<std::span<uint8_t>> lines;
  size_t start = 0;
  while (start < body.size()) {
    size_t end = start;
    while (end < body.size() && body[end] != '\n') {
      ++end;
    }
    size_t stop = end;
    if (stop > start && body[stop - 1] == '\r') {
      --stop;
    }
    lines.push_back(body.subspan(start, stop - start));
    start = end + 1;  // past the '\n'; past the end when the last line had none
  }
  return lines;
}

JsonLineRecord DecodeJsonLine(std::span<uint8_t> line, size_t line_number) {
  JsonLineRecord record;
  const std::string_view text(reinterpret_cast<const char*>(line.data()), line.size());
  if (IsBlank(text)) {
    record.error.emplace(400, "bad_json_body",
                         fmt::format("line {} is blank; every line must hold one record: {}",
                                     line_number, kRecordForms));
    return record;
  }
  // The cursor reads the base64 in place when it has no escapes: a large image is not
  // copied into a JSON string first.
  data::JsonCursor cursor(text, fmt::format("jsonlines body line {}", line_number));
  std::string scratch;
  std::optional<std::string_view> base64;
  try {
    const auto kind = cursor.Peek();
    if (kind == data::JsonCursor::Kind::kString) {
      base64 = cursor.String(&scratch);
    } else if (kind == data::JsonCursor::Kind::kObject) {
      cursor.ForEachMember([&](std::string_view key) {
        if (key == "image" && cursor.Peek() == data::JsonCursor::Kind::kString) {
          base64 = cursor.String(&scratch);
        } else if (key == "id") {
          const size_t from = cursor.offset();
          cursor.Skip();
          const std::string_view raw = text.substr(from, cursor.offset() - from);
          record.id = nlohmann::json::parse(raw.begin(), raw.end());
        } else {
          if (key == "image") {
            record.error.emplace(
                400, "bad_json_body",
                fmt::format("line {}: \"image\" must be a base64 string, not {}", line_number,
                            data::JsonCursor::KindName(cursor.Peek())));
          }
          cursor.Skip();
        }
      });
    } else {
      record.error.emplace(400, "bad_json_body",
                           fmt::format("line {} holds {}; expected {}", line_number,
                                       data::JsonCursor::KindName(kind), kRecordForms));
      return record;
    }
    cursor.ExpectEnd();
  } catch (const std::exception& e) {  // the cursor's syntax errors, with line and column
    record.error.emplace(
        400, "bad_json_body",
        fmt::format("{}; each line must be one JSON record: {}", e.what(), kRecordForms));
    return record;
  }
  if (record.error) {
    return record;
  }
  if (!base64) {
    record.error.emplace(
        400, "bad_json_body",
        fmt::format("line {} has no \"image\" member; expected {}", line_number, kRecordForms));
    return record;
  }
  std::optional<size_t> size;
  const auto* first = reinterpret_cast<const uint8_t*>(base64->data());
  if (first >= line.data() && first + base64->size() <= line.data() + line.size()) {
    const std::span<uint8_t> encoded =
        line.subspan(static_cast<size_t>(first - line.data()), base64->size());
    size = DecodeBase64InPlace(encoded);
    if (size) {
      record.in_line = encoded.first(*size);
    }
  } else if (auto bytes = DecodeBase64(*base64)) {  // unescaped into scratch
    size = bytes->size();
    record.owned = std::move(*bytes);
  }
  if (!size) {
    record.error.emplace(400, "bad_base64",
                         fmt::format("line {}: \"image\" is not valid base64 (RFC 4648, standard "
                                     "alphabet)",
                                     line_number));
  }
  return record;
}

}  // namespace mrcnn::serving
