#pragma once
// /invocations request headers and body -> what to run. Pure functions over strings and
// bytes (no sockets), so the fuzz target and unit tests drive exactly what the server runs.
// Every rejection is an HttpError carrying the status the contract asks for.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "serving/codec/image_decoding.h"
#include "serving/models/predictor.h"

namespace mrcnn::serving {

enum class BodyKind {
  kImage,  // image/jpeg, image/png, application/x-image: the body is one encoded image
  kJson,   // application/json: {"image": b64}, {"instances": [...]} or [...]
  // application/jsonlines (also application/jsonl, application/x-jsonlines): one record per
  // line, answered line for line (json_lines_decoding.h)
  kJsonLines,
};

// Media type from a Content-Type header (parameters such as charset are ignored, case-
// insensitive). Throws HttpError 415 for anything else, including a missing header.
BodyKind ClassifyContentType(std::string_view content_type);

// The media type of the answer to a body of this kind: application/jsonlines for kJsonLines,
// else application/json.
std::string_view ResponseMediaType(BodyKind kind);

// Throws HttpError 406 unless the Accept header (absent = anything) admits `media_type`
// (exactly, as type/*, or */*) with a non-zero quality. The jsonlines aliases admit each
// other.
void RequireAcceptable(std::string_view accept, std::string_view media_type);
// RequireAcceptable(accept, "application/json").
void RequireJsonAcceptable(std::string_view accept);

// The largest tile side a request may ask for (the largest image side the server decodes).
inline constexpr int64_t kMaxTileSize = 16384;

// X-Amzn-SageMaker-Custom-Attributes: comma-separated key=value pairs. Known keys:
// score_threshold (0..1), max_detections (1..max_detections_cap), masks (rle|none),
// tile_size (0..kMaxTileSize), tile_overlap (0..0.9), tile_full_image (true|false). Other keys
// are left to their owners (SageMaker users put trace ids there) and ignored. Throws
// HttpError 400 for a known key with a bad value, or a header that is longer than 1024
// characters or not visible ASCII (SageMaker's own limits).
PredictOptions ParseCustomAttributes(std::string_view header, const PredictOptions& defaults,
                                     int max_detections_cap);

// One key=value of those (key trimmed and matched in any case, value trimmed), as the custom
// attributes and the Open Inference Protocol's request parameters both set them. Returns
// false for a key that is not one of the known keys (options left alone); throws HttpError
// 400 bad_custom_attributes naming the key for a bad value.
bool ApplyPredictOption(PredictOptions& options, std::string_view key, std::string_view value,
                        int max_detections_cap);

struct EncodedImages {
  std::vector<std::span<const uint8_t>> images;  // into the body or into `owned`
  std::vector<std::vector<uint8_t>> owned;       // base64-decoded JSON payloads (not in place)
  bool list_form = false;  // answer {"predictions": [...]} rather than one object
};

// Splits a body into encoded images. The spans may point into `body`, which must outlive
// the result. Throws HttpError 400 for malformed JSON, a missing "image", invalid base64,
// an empty list or more than max_images images.
EncodedImages SplitInvocationBody(BodyKind kind, std::span<const uint8_t> body, size_t max_images);
// The same, but base64 is decoded in place inside `body` (which is overwritten): the images'
// spans point into it, and a large base64 image costs no memory beyond the body.
EncodedImages SplitInvocationBodyInPlace(BodyKind kind, std::span<uint8_t> body, size_t max_images);

}  // namespace mrcnn::serving
