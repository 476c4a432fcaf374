#pragma once
// The Open Inference Protocol's view of this server's detectors: the inputs and outputs a
// detector declares in its model metadata, and a parsed infer request (v2_request_decoding.h)
// -> the images to run and the options to run them with. Pure functions; every rejection is
// an HttpError 400 saying what to send instead.
//
// Inputs (exactly one per request):
//   "image"      BYTES [N] (or [N, 1]): encoded JPEG/PNG images. With the binary extension
//                each element is a 4-byte little-endian length and the file's bytes (what
//                tritonclient sends for np.object_ arrays of bytes); in JSON each element is
//                a string holding the file's base64 (standard alphabet, padded or not): JSON
//                strings cannot carry a JPEG's bytes, and tritonclient refuses non-UTF-8
//                bytes in JSON. parameters.content_type, when given, must be "base64".
//   "image_rgb"  UINT8 [H, W, 3] (one image) or [N, H, W, 3]: decoded RGB pixels, row-major.
// 1 <= N <= max_images; H and W within the image limits.
//
// Request parameters: score_threshold, max_detections, masks (rle | none | uint8), tile_size,
// tile_overlap, tile_full_image, each as X-Amzn-SageMaker-Custom-Attributes takes them
// (request_decoding.h), as JSON strings, numbers or booleans; masks=uint8 answers masks as
// UINT8 pixels instead of RLE. binary_data_output is the protocol's; other keys are ignored.
//
// Outputs: kV2OutputNames below, those the model has (masks only with a mask head, keypoints
// only with a keypoint head). No "outputs" in the request: all of them; a request that names
// outputs gets those, in its order, and a model run without masks when it names no "masks".
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "serving/codec/image_decoding.h"
#include "serving/codec/v2_request_decoding.h"
#include "serving/models/predictor.h"

namespace mrcnn::serving {

inline constexpr std::string_view kV2ImageInput = "image";
inline constexpr std::string_view kV2PixelsInput = "image_rgb";
inline constexpr std::array<std::string_view, 7> kV2OutputNames{
    "boxes", "scores", "labels", "classes", "masks", "keypoints", "num_detections"};

enum class V2MaskFormat { kRle, kUint8 };

// The outputs a model with these answers has, in kV2OutputNames order.
std::vector<std::string_view> V2OutputsOf(const PredictorOutputs& model);

struct V2DetectorLimits {
  PredictOptions defaults;
  int max_detections_cap = 1000;
  ImageLimits image_limits;
  size_t max_images = 16;
};

struct V2DetectorRequest {
  std::vector<std::span<const uint8_t>> encoded;  // "image": into the body, or into `owned`
  std::vector<std::vector<uint8_t>> owned;        // base64-decoded JSON elements
  std::vector<RgbImage> pixels;                   // "image_rgb": one per image
  PredictOptions options;
  V2MaskFormat mask_format = V2MaskFormat::kRle;
  std::vector<V2RequestedOutput> outputs;  // what the answer holds, in its order
  nlohmann::json id;
};

// The spans of the result may point into the request's binary data (the body).
V2DetectorRequest InterpretV2DetectorRequest(const V2InferRequest& request,
                                             const PredictorOutputs& model,
                                             const V2DetectorLimits& limits);

}  // namespace mrcnn::serving
