#pragma once
// An application/jsonlines /invocations body -> its records. SageMaker batch transform with
// SplitType Line packs lines of the input file into one request (BatchStrategy MultiRecord:
// as many as fit MaxPayloadInMB; SingleRecord: one); the answer has exactly one line per
// record, in order, so that the platform can join output to input line by line.
//
// A record is {"image": "<base64 JPEG or PNG>", "id": <any JSON, optional>} (other members
// are ignored) or a bare JSON string of base64. Pure functions over bytes, like
// request_decoding.h: a bad record is reported, never thrown, so it cannot fail its
// neighbours.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "serving/http/http_error.h"

namespace mrcnn::serving {

// The body split at '\n' ('\r' before it dropped). The last line's terminator is optional
// and does not start another record ("a\nb\n" and "a\nb" are two records; an empty body is
// none). Every other line is a record, a blank one included, so that output line N always
// answers input line N.
std::vector<std::span<uint8_t>> SplitJsonLines(std::span<uint8_t> body);

struct JsonLineRecord {
  std::optional<nlohmann::json> id;  // echoed on the record's answer, also on an error
  std::optional<HttpError> error;    // 400 bad_json_body or bad_base64; no image then
  // The base64-decoded bytes (not yet an image): in the line itself, or in `owned` when the
  // JSON string had escapes.
  std::span<const uint8_t> in_line;
  std::vector<uint8_t> owned;
  std::span<const uint8_t> image() const { return owned.empty() ? in_line : owned; }
};

// `line_number` is 1-based, for the error detail. The base64 is decoded in place, so the
// line's bytes are overwritten: a large image costs no copy besides the body it came in.
JsonLineRecord DecodeJsonLine(std::span<uint8_t> line, size_t line_number);

}  // namespace mrcnn::serving
