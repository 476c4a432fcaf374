#pragma once
// An Open Inference Protocol infer request body (POST /v2/models/{name}/infer) -> its
// inputs, requested outputs and parameters, for any model. Pure functions over bytes.
//
// The body is JSON, or, with the binary tensor extension, a JSON header of
// Inference-Header-Content-Length bytes followed by the binary data of the inputs whose
// parameters carry "binary_data_size", in the order of "inputs". JSON:
//   {"id": any, "parameters": {...},
//    "inputs": [{"name", "shape": [...], "datatype", "parameters": {"binary_data_size": n},
//                "data": [...] (flat or nested; absent when binary)}],
//    "outputs": [{"name", "parameters": {"binary_data": bool}}]}
// Unknown members are tolerated (ignored). Every rejection is an HttpError 400 (bad_request)
// saying which member or tensor is wrong.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "serving/codec/v2_tensor.h"

namespace mrcnn::serving {

struct V2InputTensor {
  std::string name;
  V2Datatype datatype = V2Datatype::kBytes;
  std::vector<int64_t> shape;
  // The binary extension's bytes (into the body), when the input had binary_data_size.
  std::optional<std::span<const uint8_t>> binary;
  nlohmann::json data;  // the JSON "data" otherwise (null when binary)
  nlohmann::json parameters = nlohmann::json::object();
};

struct V2RequestedOutput {
  std::string name;
  bool binary = false;
  bool operator==(const V2RequestedOutput&) const = default;
};

struct V2InferRequest {
  nlohmann::json id;  // null when the request had none
  nlohmann::json parameters = nlohmann::json::object();
  std::vector<V2InputTensor> inputs;
  // Absent: every output the model has. Each output's binary flag defaults to the request's
  // "binary_data_output" parameter (false when absent).
  std::optional<std::vector<V2RequestedOutput>> outputs;
  bool binary_data_output = false;
};

// Inference-Header-Content-Length as sent (empty: the whole body is JSON). Throws
// HttpError 400 when it is not a decimal number.
std::optional<size_t> ParseV2HeaderLength(std::string_view header_value);

// The spans of the result point into `body`, which must outlive it. Throws HttpError 400 for
// bad JSON, a header length beyond the body, a missing or mistyped member, binary sizes that
// do not add up to the bytes after the header, or a JSON input without "data".
V2InferRequest ParseV2InferRequest(std::span<const uint8_t> body,
                                   std::optional<size_t> header_length);

// A JSON "data" (flat or nested to any depth) as its elements in row-major order.
std::vector<const nlohmann::json*> FlattenV2Data(const nlohmann::json& data);

}  // namespace mrcnn::serving
