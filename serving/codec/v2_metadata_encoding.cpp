#include "serving/codec/v2_metadata_encoding.h"

#include <nlohmann/json.hpp>

#include "serving/codec/v2_detector_request.h"

namespace mrcnn::serving {
namespace {

using Json = nlohmann::json;

Json Tensor(std::string_view name, std::string_view datatype, std::vector<int64_t> shape) {
  return {{"name", std::string(name)}, {"datatype", std::string(datatype)}, {"shape", shape}};
}

Json OutputTensor(std::string_view name, const PredictorOutputs& model) {
  if (name == "boxes") {
    return Tensor(name, "FP32", {-1, 4});
  }
  if (name == "scores") {
    return Tensor(name, "FP32", {-1});
  }
  if (name == "labels" || name == "num_detections") {
    return Tensor(name, "INT64", {-1});
  }
  if (name == "keypoints") {
    return Tensor(name, "FP32", {-1, model.keypoints, 3});
  }
  return Tensor(name, "BYTES", {-1});  // classes, masks (COCO RLE JSON)
}

}  // namespace

std::string EncodeV2ServerMetadata(std::string_view name, std::string_view version) {
  return Json{{"name", std::string(name)},
              {"version", std::string(version)},
              {"extensions", {"binary_tensor_data"}}}
      .dump();
}

std::string EncodeV2ModelMetadata(const std::string& name, const std::vector<std::string>& versions,
                                  const PredictorOutputs& model) {
  Json outputs = Json::array();
  for (const std::string_view output : V2OutputsOf(model)) {
    outputs.push_back(OutputTensor(output, model));
  }
  return Json{
      {"name", name},
      {"versions", versions},
      {"platform", model.platform},
      {"inputs",
       {Tensor(kV2ImageInput, "BYTES", {-1}), Tensor(kV2PixelsInput, "UINT8", {-1, -1, -1, 3})}},
      {"outputs", std::move(outputs)}}
      .dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace mrcnn::serving
