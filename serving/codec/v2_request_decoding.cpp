#include "serving/codec/v2_request_decoding.h"

#include <fmt/format.h>

#include <charconv>

#include "serving/http/http_error.h"

namespace mrcnn::serving {
namespace {

using Json = nlohmann::json;

HttpError BadRequest(const std::string& what) {
  return HttpError(400, "bad_request", what);
}

Json ParseJsonHeader(std::span<const uint8_t> body, std::optional<size_t> header_length) {
  const size_t length = header_length.value_or(body.size());
  if (length > body.size()) {
    throw BadRequest(
        fmt::format("Inference-Header-Content-Length is {} but the body has only {} "
                    "bytes",
                    length, body.size()));
  }
  try {
    Json doc = Json::parse(body.begin(), body.begin() + static_cast<std::ptrdiff_t>(length));
    if (!doc.is_object()) {
      throw BadRequest("the inference request must be a JSON object with \"inputs\"");
    }
    return doc;
  } catch (const Json::exception& e) {
    throw BadRequest(fmt::format(
        "the inference request is not valid JSON{}: {}",
        header_length ? " (its first Inference-Header-Content-Length bytes)" : "", e.what()));
  }
}

// doc[key] as an object, or {} when absent.
Json ParametersOf(const Json& doc, const std::string& where) {
  const auto it = doc.find("parameters");
  if (it == doc.end() || it->is_null()) {
    return Json::object();
  }
  if (!it->is_object()) {
    throw BadRequest(fmt::format("{}: \"parameters\" must be an object", where));
  }
  return *it;
}

std::string StringMember(const Json& doc, const char* key, const std::string& where) {
  const auto it = doc.find(key);
  if (it == doc.end() || !it->is_string()) {
    throw BadRequest(fmt::format("{}: \"{}\" must be a string", where, key));
  }
  return it->get<std::string>();
}

std::optional<int64_t> BinaryDataSize(const Json& parameters, const std::string& where) {
  const auto it = parameters.find("binary_data_size");
  if (it == parameters.end() || it->is_null()) {
    return std::nullopt;
  }
  if (!it->is_number_integer() || it->get<int64_t>() < 0) {
    throw BadRequest(fmt::format("{}: \"binary_data_size\" must be a non-negative integer", where));
  }
  return it->get<int64_t>();
}

V2InputTensor ParseInput(const Json& item, size_t index) {
  const std::string where = fmt::format("inputs[{}]", index);
  if (!item.is_object()) {
    throw BadRequest(fmt::format("{} must be an object", where));
  }
  V2InputTensor input;
  input.name = StringMember(item, "name", where);
  const std::string tensor = fmt::format("input \"{}\"", input.name);
  const std::string datatype = StringMember(item, "datatype", tensor);
  const auto parsed = ParseV2Datatype(datatype);
  if (!parsed) {
    throw BadRequest(fmt::format("{}: unknown datatype \"{}\"", tensor, datatype));
  }
  input.datatype = *parsed;
  const auto shape = item.find("shape");
  if (shape == item.end() || !shape->is_array()) {
    throw BadRequest(fmt::format("{}: \"shape\" must be an array of integers", tensor));
  }
  for (const Json& dimension : *shape) {
    if (!dimension.is_number_integer()) {
      throw BadRequest(fmt::format("{}: \"shape\" must be an array of integers", tensor));
    }
    input.shape.push_back(dimension.get<int64_t>());
  }
  V2ElementCount(input.shape, input.name);  // refuses negative and huge shapes
  input.parameters = ParametersOf(item, tensor);
  if (!BinaryDataSize(input.parameters, tensor)) {
    const auto data = item.find("data");
    if (data == item.end()) {
      throw BadRequest(
          fmt::format("{}: no \"data\" and no \"binary_data_size\" parameter", tensor));
    }
    input.data = *data;
  }
  return input;
}

std::vector<V2RequestedOutput> ParseOutputs(const Json& outputs, bool binary_default) {
  if (!outputs.is_array()) {
    throw BadRequest("\"outputs\" must be an array of {\"name\": ...} objects");
  }
  std::vector<V2RequestedOutput> requested;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const std::string where = fmt::format("outputs[{}]", i);
    if (!outputs[i].is_object()) {
      throw BadRequest(fmt::format("{} must be an object", where));
    }
    V2RequestedOutput output{StringMember(outputs[i], "name", where), binary_default};
    const Json parameters = ParametersOf(outputs[i], where);
    if (const auto it = parameters.find("binary_data"); it != parameters.end()) {
      if (!it->is_boolean()) {
        throw BadRequest(fmt::format("{}: \"binary_data\" must be true or false", where));
      }
      output.binary = it->get<bool>();
    }
    requested.push_back(std::move(output));
  }
  return requested;
}

// Hands each binary input its bytes from `tail`, the body after the JSON header.
void AssignBinaryData(std::vector<V2InputTensor>& inputs, std::span<const uint8_t> tail) {
  size_t at = 0;
  for (V2InputTensor& input : inputs) {
    const auto size = BinaryDataSize(input.parameters, input.name);
    if (!size) {
      continue;
    }
    const auto bytes = static_cast<size_t>(*size);
    if (tail.size() - at < bytes) {
      throw BadRequest(
          fmt::format("input \"{}\": binary_data_size is {} but only {} bytes of "
                      "binary data are left in the body (truncated)",
                      input.name, bytes, tail.size() - at));
    }
    input.binary = tail.subspan(at, bytes);
    at += bytes;
  }
  if (at != tail.size()) {
    throw BadRequest(
        fmt::format("the body holds {} bytes after the JSON header but the inputs' "
                    "binary_data_size add up to {}",
                    tail.size(), at));
  }
}

void Flatten(const Json& value, std::vector<const Json*>& out) {
  if (value.is_array()) {
    for (const Json& item : value) {
      Flatten(item, out);
    }
  } else {
    out.push_back(&value);
  }
}

}  // namespace

std::optional<size_t> ParseV2HeaderLength(std::string_view header_value) {
  if (header_value.empty()) {
    return std::nullopt;
  }
  size_t length = 0;
  const char* last = header_value.data() + header_value.size();
  const auto [end, ec] = std::from_chars(header_value.data(), last, length);
  if (ec != std::errc() || end != last) {
    throw BadRequest(
        fmt::format("Inference-Header-Content-Length must be a decimal number of "
                    "bytes, got \"{}\"",
                    std::string(header_value.substr(0, 40))));
  }
  return length;
}

V2InferRequest ParseV2InferRequest(std::span<const uint8_t> body,
                                   std::optional<size_t> header_length) {
  const Json doc = ParseJsonHeader(body, header_length);
  V2InferRequest request;
  if (const auto it = doc.find("id"); it != doc.end()) {
    request.id = *it;
  }
  request.parameters = ParametersOf(doc, "the request");
  if (const auto it = request.parameters.find("binary_data_output");
      it != request.parameters.end()) {
    if (!it->is_boolean()) {
      throw BadRequest("parameters: \"binary_data_output\" must be true or false");
    }
    request.binary_data_output = it->get<bool>();
  }
  const auto inputs = doc.find("inputs");
  if (inputs == doc.end() || !inputs->is_array()) {
    throw BadRequest("the inference request needs \"inputs\", an array of tensors");
  }
  for (size_t i = 0; i < inputs->size(); ++i) {
    request.inputs.push_back(ParseInput((*inputs)[i], i));
  }
  if (const auto it = doc.find("outputs"); it != doc.end() && !it->is_null()) {
    request.outputs = ParseOutputs(*it, request.binary_data_output);
  }
  AssignBinaryData(request.inputs,
                   header_length ? body.subspan(*header_length) : std::span<const uint8_t>());
  return request;
}

std::vector<const nlohmann::json*> FlattenV2Data(const nlohmann::json& data) {
  std::vector<const Json*> elements;
  Flatten(data, elements);
  return elements;
}

}  // namespace mrcnn::serving
