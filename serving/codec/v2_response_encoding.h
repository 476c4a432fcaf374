#pragma once
// Detections -> an Open Inference Protocol infer response, JSON or with the binary tensor
// extension. Pure functions.
//
// One image per request: boxes FP32 [N, 4] (x1, y1, x2, y2 in the image's pixels), scores
// FP32 [N], labels INT64 [N] (dataset category ids), classes BYTES [N] (class names), masks
// BYTES [N] (each the COCO RLE JSON {"size": [H, W], "counts": "..."} that /invocations
// answers) or, with masks=uint8, UINT8 [N, H, W] of 0/1, keypoints FP32 [N, K, 3] (x, y,
// score), num_detections INT64 [1]. Detections sorted by descending score.
// B > 1 images: every per-detection output gets a leading batch dimension and is padded to
// the largest N of the batch, M: boxes [B, M, 4], scores [B, M], labels [B, M], classes
// [B, M], masks [B, M] or [B, M, H, W], keypoints [B, M, K, 3], and num_detections [B]
// says how many rows of image b are real. Padding is 0 (labels -1, classes and masks "").
//
// The answer: {"model_name", "model_version", "id" (when the request had one), "outputs":
// [{"name", "datatype", "shape", "data": [...]} or, binary, {"name", "datatype", "shape",
// "parameters": {"binary_data_size": n}}]}; with any binary output the body is that JSON
// followed by the binary outputs' bytes in order (little-endian numbers, BYTES elements
// length-prefixed), and header_length is the JSON's size (Inference-Header-Content-Length).
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "serving/codec/v2_detector_request.h"
#include "serving/models/predictor.h"

namespace mrcnn::serving {

struct V2ResponseSpec {
  std::string model_name;
  std::string model_version;
  nlohmann::json id;  // echoed when not null
  std::vector<V2RequestedOutput> outputs;
  V2MaskFormat mask_format = V2MaskFormat::kRle;
  int64_t keypoints = 0;  // per detection (the model's), for the shape of no detections
};

struct V2EncodedAnswer {
  std::string body;
  std::optional<size_t> header_length;  // set when the body carries binary outputs
};

// Throws HttpError 400 for UINT8 masks of images of different sizes (they make no one
// tensor), std::runtime_error for a predictor's mask that does not fit its image.
V2EncodedAnswer EncodeV2InferResponse(const std::vector<ImageDetections>& images,
                                      const V2ResponseSpec& spec);

}  // namespace mrcnn::serving
