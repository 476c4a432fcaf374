#pragma once
// Detections -> the /invocations JSON body (error bodies: http/route.h, EncodeErrorJson).
//
// One image:   {"height": H, "width": W, "detections": [DETECTION, ...]}
// List forms:  {"predictions": [{"height": ..., "width": ..., "detections": [...]}, ...]}
// DETECTION:   {"box": [x1, y1, x2, y2], "label": "person", "category_id": 1, "score": 0.98,
//               "mask": {"size": [H, W], "counts": "<pycocotools compressed RLE>"}}
// "mask" is left out when the request asked for masks=none.
//
// JSON Lines (one line per record of an application/jsonlines request, json_lines_decoding.h):
//   an image:  {"height": H, "width": W, "detections": [...], "id": <the record's id>}
//   an error:  {"error": code, "detail": why, "id": <the record's id>}
// "id" only when the record had one.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "serving/models/predictor.h"

namespace mrcnn::serving {

// A detection's mask as the full image's RLE, whichever form the predictor gave it in (an RLE
// already, or pixels of its mask region). Throws std::runtime_error when the predictor's
// mask does not fit the image (a predictor bug, answered 500).
data::Rle DetectionMaskRle(const Detection& detection, const ImageDetections& image);

std::string EncodeDetectionsJson(const std::vector<ImageDetections>& images, bool list_form,
                                 bool masks);

// One line of a JSON Lines answer, without its newline. Never contains a raw newline (JSON
// escapes them in strings), so the answer stays one line per record.
std::string EncodeRecordJson(const ImageDetections& image, bool masks,
                             const std::optional<nlohmann::json>& id);
std::string EncodeRecordErrorJson(const std::string& code, const std::string& detail,
                                  const std::optional<nlohmann::json>& id);

}  // namespace mrcnn::serving
