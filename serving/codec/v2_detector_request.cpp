#include "serving/codec/v2_detector_request.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>

#include "serving/codec/base64.h"
#include "serving/codec/request_decoding.h"
#include "serving/http/http_error.h"

namespace mrcnn::serving {
namespace {

using Json = nlohmann::json;

HttpError BadRequest(const std::string& what) {
  return HttpError(400, "bad_request", what);
}

// A parameter's JSON value as the custom attributes would spell it.
std::string ParameterText(const std::string& key, const Json& value) {
  if (value.is_string()) {
    return value.get<std::string>();
  }
  if (value.is_boolean()) {
    return value.get<bool>() ? "true" : "false";
  }
  if (value.is_number()) {
    return value.dump();
  }
  throw BadRequest(fmt::format("parameters: \"{}\" must be a string, number or boolean", key));
}

void ApplyParameters(const Json& parameters, const V2DetectorLimits& limits,
                     V2DetectorRequest& out) {
  for (const auto& [key, value] : parameters.items()) {
    if (key == "binary_data_output") {
      continue;  // the protocol's, read by ParseV2InferRequest
    }
    if (key == "masks" && value.is_string() && value.get<std::string>() == "uint8") {
      out.options.masks = true;
      out.mask_format = V2MaskFormat::kUint8;
      continue;
    }
    try {
      ApplyPredictOption(out.options, key, ParameterText(key, value), limits.max_detections_cap);
    } catch (const HttpError& e) {
      throw BadRequest(fmt::format("parameters: {}{}", e.detail(),
                                   key == "masks" ? " (or \"uint8\" for pixel masks)" : ""));
    }
  }
}

int64_t ImageCount(const V2InputTensor& input, int64_t count, const V2DetectorLimits& limits) {
  if (count < 1 || static_cast<size_t>(count) > limits.max_images) {
    throw BadRequest(
        fmt::format("input \"{}\": {} images; a request holds 1 to {} "
                    "(--max-images-per-request)",
                    input.name, count, limits.max_images));
  }
  return count;
}

void TakeEncodedImages(const V2InputTensor& input, const V2DetectorLimits& limits,
                       V2DetectorRequest& out) {
  const auto& shape = input.shape;
  if (!(shape.size() == 1 || (shape.size() == 2 && shape[1] == 1))) {
    throw BadRequest(
        fmt::format("input \"image\": shape must be [N] (or [N, 1]) for N encoded "
                    "images, got [{}]",
                    fmt::join(shape, ", ")));
  }
  const int64_t count = ImageCount(input, shape[0], limits);
  if (input.binary) {
    out.encoded = SplitV2BytesElements(*input.binary, count, input.name);
    return;
  }
  if (const auto it = input.parameters.find("content_type");
      it != input.parameters.end() && *it != "base64") {
    throw BadRequest(
        fmt::format("input \"image\": content_type {} is not supported: in JSON an "
                    "image is the base64 of its JPEG or PNG file (content_type "
                    "\"base64\"), or send it binary (binary_data_size)",
                    it->dump()));
  }
  const auto elements = FlattenV2Data(input.data);
  if (static_cast<int64_t>(elements.size()) != count) {
    throw BadRequest(
        fmt::format("input \"image\": shape [{}] holds {} elements but \"data\" has {}",
                    fmt::join(shape, ", "), count, elements.size()));
  }
  for (size_t i = 0; i < elements.size(); ++i) {
    auto decoded = elements[i]->is_string()
                       ? DecodeBase64(elements[i]->get_ref<const std::string&>())
                       : std::nullopt;
    if (!decoded) {
      throw BadRequest(
          fmt::format("input \"image\": element {} is not a base64 string of a JPEG "
                      "or PNG file",
                      i));
    }
    out.owned.push_back(std::move(*decoded));
  }
  for (const auto& bytes : out.owned) {
    out.encoded.emplace_back(bytes);
  }
}

// The pixels of one [H, W, 3] image: from the binary data or from JSON integers 0..255.
void CopyPixels(const V2InputTensor& input, const std::vector<const Json*>& elements, size_t offset,
                RgbImage& image) {
  image.pixels.resize(static_cast<size_t>(image.height * image.width * 3));
  if (input.binary) {
    std::memcpy(image.pixels.data(), input.binary->data() + offset, image.pixels.size());
    return;
  }
  for (size_t i = 0; i < image.pixels.size(); ++i) {
    const Json& value = *elements[offset + i];
    if (!value.is_number_integer() || value.get<int64_t>() < 0 || value.get<int64_t>() > 255) {
      throw BadRequest(
          fmt::format("input \"image_rgb\": element {} is {}, not an integer in "
                      "[0, 255]",
                      offset + i, value.dump()));
    }
    image.pixels[i] = static_cast<uint8_t>(value.get<int64_t>());
  }
}

void TakePixelImages(const V2InputTensor& input, const V2DetectorLimits& limits,
                     V2DetectorRequest& out) {
  const auto& shape = input.shape;
  if ((shape.size() != 3 && shape.size() != 4) || shape.back() != 3) {
    throw BadRequest(
        fmt::format("input \"image_rgb\": shape must be [H, W, 3] or [N, H, W, 3], "
                    "got [{}]",
                    fmt::join(shape, ", ")));
  }
  const int64_t count = ImageCount(input, shape.size() == 4 ? shape[0] : 1, limits);
  const int64_t height = shape[shape.size() - 3];
  const int64_t width = shape[shape.size() - 2];
  if (height < 1 || width < 1 || height > limits.image_limits.max_side ||
      width > limits.image_limits.max_side || height * width > limits.image_limits.max_pixels) {
    throw HttpError(
        400, "image_too_large",
        fmt::format("input \"image_rgb\": a {}x{} image is outside the limits (1 to "
                    "{} per side, at most {} pixels)",
                    width, height, limits.image_limits.max_side, limits.image_limits.max_pixels));
  }
  const size_t per_image = static_cast<size_t>(height * width * 3);
  std::vector<const Json*> elements;
  const size_t total = per_image * static_cast<size_t>(count);
  if (input.binary && input.binary->size() != total) {
    throw BadRequest(
        fmt::format("input \"image_rgb\": shape [{}] needs {} bytes but "
                    "binary_data_size is {}",
                    fmt::join(shape, ", "), total, input.binary->size()));
  }
  if (!input.binary) {
    elements = FlattenV2Data(input.data);
    if (elements.size() != total) {
      throw BadRequest(
          fmt::format("input \"image_rgb\": shape [{}] holds {} elements but "
                      "\"data\" has {}",
                      fmt::join(shape, ", "), total, elements.size()));
    }
  }
  for (int64_t i = 0; i < count; ++i) {
    RgbImage image{height, width, {}};
    CopyPixels(input, elements, static_cast<size_t>(i) * per_image, image);
    out.pixels.push_back(std::move(image));
  }
}

void TakeInput(const V2InferRequest& request, const V2DetectorLimits& limits,
               V2DetectorRequest& out) {
  if (request.inputs.size() != 1) {
    throw BadRequest(
        fmt::format("the request has {} inputs; send exactly one: \"image\" (BYTES, "
                    "encoded JPEG/PNG) or \"image_rgb\" (UINT8 [H, W, 3])",
                    request.inputs.size()));
  }
  const V2InputTensor& input = request.inputs.front();
  const bool encoded = input.name == kV2ImageInput;
  if (!encoded && input.name != kV2PixelsInput) {
    throw BadRequest(
        fmt::format("unknown input \"{}\": this model's inputs are \"image\" (BYTES, "
                    "encoded JPEG/PNG) and \"image_rgb\" (UINT8 [H, W, 3])",
                    input.name));
  }
  const V2Datatype wanted = encoded ? V2Datatype::kBytes : V2Datatype::kUint8;
  if (input.datatype != wanted) {
    throw BadRequest(fmt::format("input \"{}\" must be {}, got {}", input.name,
                                 V2DatatypeName(wanted), V2DatatypeName(input.datatype)));
  }
  if (encoded) {
    TakeEncodedImages(input, limits, out);
  } else {
    TakePixelImages(input, limits, out);
  }
}

// The outputs the answer holds; turns masks off when the answer holds none.
void ResolveOutputs(const V2InferRequest& request, const PredictorOutputs& model,
                    V2DetectorRequest& out) {
  const auto offered = V2OutputsOf(model);
  if (!request.outputs) {
    for (const std::string_view name : offered) {
      if (name != "masks" || out.options.masks) {
        out.outputs.push_back({std::string(name), request.binary_data_output});
      }
    }
    return;
  }
  bool masks = false;
  for (const V2RequestedOutput& output : *request.outputs) {
    if (std::find(offered.begin(), offered.end(), output.name) == offered.end()) {
      throw BadRequest(fmt::format("unknown output \"{}\": this model's outputs are {}",
                                   output.name, fmt::join(offered, ", ")));
    }
    if (std::any_of(out.outputs.begin(), out.outputs.end(),
                    [&](const V2RequestedOutput& seen) { return seen.name == output.name; })) {
      throw BadRequest(fmt::format("output \"{}\" is requested twice", output.name));
    }
    masks = masks || output.name == "masks";
    out.outputs.push_back(output);
  }
  if (masks && !out.options.masks) {
    throw BadRequest("output \"masks\" is requested, but parameters say masks=none");
  }
  out.options.masks = masks;
}

}  // namespace

std::vector<std::string_view> V2OutputsOf(const PredictorOutputs& model) {
  std::vector<std::string_view> names;
  for (const std::string_view name : kV2OutputNames) {
    if ((name != "masks" || model.masks) && (name != "keypoints" || model.keypoints > 0)) {
      names.push_back(name);
    }
  }
  return names;
}

V2DetectorRequest InterpretV2DetectorRequest(const V2InferRequest& request,
                                             const PredictorOutputs& model,
                                             const V2DetectorLimits& limits) {
  V2DetectorRequest out;
  out.id = request.id;
  out.options = limits.defaults;
  ApplyParameters(request.parameters, limits, out);
  TakeInput(request, limits, out);
  ResolveOutputs(request, model, out);
  return out;
}

}  // namespace mrcnn::serving
