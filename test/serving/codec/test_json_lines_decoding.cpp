// application/jsonlines bodies: line splitting (what a trailing newline, CRLF and blank lines
// make), record forms, and bad records reported without throwing, with their id.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "serving/codec/base64.h"
#include "serving/codec/json_lines_decoding.h"
#include "serving/codec/request_decoding.h"

using namespace mrcnn::serving;
using nlohmann::json;

namespace {

std::span<uint8_t> Bytes(std::string& s) {
  return {reinterpret_cast<uint8_t*>(s.data()), s.size()};
}

std::vector<std::string> Lines(std::string body) {
  std::vector<std::string> lines;
  for (auto line : SplitJsonLines(Bytes(body))) {
    lines.emplace_back(line.begin(), line.end());
  }
  return lines;
}

// The record, its image bytes copied out (they may live in the line, decoded in place).
struct Decoded {
  JsonLineRecord record;
  std::vector<uint8_t> image;
};

Decoded Decode(std::string line, size_t number = 1) {
  Decoded out{DecodeJsonLine(Bytes(line), number), {}};
  const auto image = out.record.image();
  out.image.assign(image.begin(), image.end());
  out.record.in_line = {};
  return out;
}

const std::vector<uint8_t> kPayload = {0x89, 'P', 'N', 'G', 0, 1, 0xFF, 0xFF, 0xFF};  // "////"
const std::string kBase64 = EncodeBase64(kPayload.data(), kPayload.size());

}  // namespace

TEST_CASE("a JSON Lines body splits into one record per line", "[serving][jsonlines]") {
  using V = std::vector<std::string>;
  CHECK(Lines("") == V{});
  CHECK(Lines("a") == V{"a"});
  CHECK(Lines("a\nb") == V{"a", "b"});
  CHECK(Lines("a\nb\n") == V{"a", "b"});  // the last terminator starts no record
  CHECK(Lines("a\r\nb\r\n") == V{"a", "b"});
  CHECK(Lines("a\n\nb\n") == V{"a", "", "b"});  // an inner blank line is a record
  CHECK(Lines("a\n\n") == V{"a", ""});
  CHECK(Lines("\n") == V{""});
  CHECK(Lines("a\rb\n") == V{"a\rb"});  // only a CR before LF is part of the terminator
}

TEST_CASE("JSON Lines records: an object with image and id, or a bare base64 string",
          "[serving][jsonlines]") {
  const Decoded object = Decode(json{{"image", kBase64}, {"id", 7}}.dump());
  REQUIRE_FALSE(object.record.error);
  CHECK(object.image == kPayload);
  REQUIRE(object.record.id);
  CHECK(*object.record.id == json(7));

  // id after image, any JSON, other members ignored, whitespace around.
  const Decoded nested = Decode("  {\"image\": \"" + kBase64 +
                                "\", \"extra\": [1, {}], \"id\": {\"s3\": [\"k\", 2]}} ");
  REQUIRE_FALSE(nested.record.error);
  CHECK(nested.image == kPayload);
  REQUIRE(nested.record.id);
  CHECK(*nested.record.id == json{{"s3", {"k", 2}}});

  const Decoded bare = Decode(json(kBase64).dump());
  REQUIRE_FALSE(bare.record.error);
  CHECK(bare.image == kPayload);
  CHECK_FALSE(bare.record.id);

  // Escapes in the string ("\/" is how some encoders write '/') decode like the text.
  std::string escaped = kBase64;
  const size_t slash = escaped.find('/');
  if (slash != std::string::npos) {
    escaped.replace(slash, 1, "\\/");
  }
  REQUIRE(slash != std::string::npos);
  const Decoded with_escape = Decode("{\"image\": \"" + escaped + "\"}");
  REQUIRE_FALSE(with_escape.record.error);
  CHECK(with_escape.image == kPayload);

  const Decoded null_id = Decode(json{{"image", kBase64}, {"id", nullptr}}.dump());
  REQUIRE(null_id.record.id);  // present, and null
  CHECK(null_id.record.id->is_null());
}

TEST_CASE("bad JSON Lines records are reported with their line and id, never thrown",
          "[serving][jsonlines]") {
  struct Case {
    std::string line;
    std::string code;
    std::string detail_part;
    std::optional<json> id;
  };
  const std::vector<Case> cases = {
      {"{\"image\": ", "bad_json_body", "line 4", std::nullopt},
      {"not json", "bad_json_body", "line 4", std::nullopt},
      {"{\"image\": \"" + kBase64 + "\"} trailing", "bad_json_body", "line 4", std::nullopt},
      {"", "bad_json_body", "line 4 is blank", std::nullopt},
      {" \t", "bad_json_body", "line 4 is blank", std::nullopt},
      {"42", "bad_json_body", "line 4 holds a number", std::nullopt},
      {"[\"" + kBase64 + "\"]", "bad_json_body", "line 4 holds an array", std::nullopt},
      {"{\"id\": \"x\"}", "bad_json_body", "no \"image\"", json("x")},
      {"{\"image\": 5, \"id\": [1]}", "bad_json_body", "must be a base64 string", json{1}},
      {"{\"id\": 3, \"image\": \"###\"}", "bad_base64", "line 4", json(3)},
      {"\"a\"", "bad_base64", "line 4", std::nullopt},
  };
  for (const Case& c : cases) {
    INFO(c.line);
    Decoded decoded;
    REQUIRE_NOTHROW(decoded = Decode(c.line, 4));
    const JsonLineRecord& record = decoded.record;
    REQUIRE(record.error);
    CHECK(record.error->status() == 400);
    CHECK(record.error->code() == c.code);
    CHECK_THAT(record.error->detail(), Catch::Contains(c.detail_part));
    REQUIRE(record.id.has_value() == c.id.has_value());
    if (c.id) {
      CHECK(*record.id == *c.id);
    }
    CHECK(decoded.image.empty());
  }
}

TEST_CASE("JSON Lines content types and Accept", "[serving][jsonlines][request]") {
  for (const char* type : {"application/jsonlines", "application/jsonl", "application/x-jsonlines",
                           "Application/JSONLines; charset=utf-8"}) {
    CHECK(ClassifyContentType(type) == BodyKind::kJsonLines);
  }
  CHECK(ResponseMediaType(BodyKind::kJsonLines) == "application/jsonlines");
  CHECK(ResponseMediaType(BodyKind::kJson) == "application/json");
  CHECK_NOTHROW(RequireAcceptable("", "application/jsonlines"));
  CHECK_NOTHROW(RequireAcceptable("application/jsonlines", "application/jsonlines"));
  CHECK_NOTHROW(RequireAcceptable("application/x-jsonlines", "application/jsonlines"));
  CHECK_NOTHROW(RequireAcceptable("application/*;q=0.2", "application/jsonlines"));
  CHECK_THROWS_AS(RequireAcceptable("application/json", "application/jsonlines"), HttpError);
  CHECK_THROWS_AS(RequireAcceptable("application/jsonlines", "application/json"), HttpError);
  CHECK_THROWS_AS(RequireAcceptable("text/*", "application/json"), HttpError);
}
