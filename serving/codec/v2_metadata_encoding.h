#pragma once
// The Open Inference Protocol's metadata answers, as JSON bodies. Pure functions.
//
// Server (GET /v2): {"name", "version", "extensions": ["binary_tensor_data"]}.
// Model (GET /v2/models/{name}[/versions/{v}]): {"name", "versions", "platform",
//   "inputs": [{"name": "image", "datatype": "BYTES", "shape": [-1]},
//              {"name": "image_rgb", "datatype": "UINT8", "shape": [-1, -1, -1, 3]}],
//   "outputs": [{"name", "datatype", "shape"}, ...]}: the outputs of v2_detector_request.h,
// in the shapes of a one-image answer (-1 for the number of detections; masks BYTES [-1],
// keypoints FP32 [-1, K, 3]); "image_rgb" also takes one image as [H, W, 3], and several
// images add a leading batch dimension to every output (v2_response_encoding.h).
#include <string>
#include <string_view>
#include <vector>

#include "serving/models/predictor.h"

namespace mrcnn::serving {

std::string EncodeV2ServerMetadata(std::string_view name, std::string_view version);

std::string EncodeV2ModelMetadata(const std::string& name, const std::vector<std::string>& versions,
                                  const PredictorOutputs& model);

}  // namespace mrcnn::serving
