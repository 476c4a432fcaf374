#include "serving/codec/v2_response_encoding.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <stdexcept>
#include <variant>

#include "serving/codec/response_encoding.h"
#include "serving/codec/v2_tensor.h"
#include "serving/http/http_error.h"
#include "trainer/data/mask_rle.h"

namespace mrcnn::serving {
namespace {

static_assert(std::endian::native == std::endian::little,
              "binary tensors are written as the host stores numbers: little-endian only");

using Json = nlohmann::json;
using Values = std::variant<std::vector<float>, std::vector<int64_t>, std::vector<uint8_t>,
                            std::vector<std::string>>;

struct OutputTensor {
  V2Datatype datatype = V2Datatype::kFp32;
  std::vector<int64_t> row_shape;  // one detection's dimensions
  Values values;
};

// The datatype, one detection's dimensions and an empty value list of an output.
OutputTensor EmptyOutput(std::string_view name, const V2ResponseSpec& spec, int64_t height,
                         int64_t width) {
  if (name == "boxes") {
    return {V2Datatype::kFp32, {4}, std::vector<float>()};
  }
  if (name == "scores") {
    return {V2Datatype::kFp32, {}, std::vector<float>()};
  }
  if (name == "labels" || name == "num_detections") {
    return {V2Datatype::kInt64, {}, std::vector<int64_t>()};
  }
  if (name == "keypoints") {
    return {V2Datatype::kFp32, {spec.keypoints, 3}, std::vector<float>()};
  }
  if (name == "masks" && spec.mask_format == V2MaskFormat::kUint8) {
    return {V2Datatype::kUint8, {height, width}, std::vector<uint8_t>()};
  }
  return {V2Datatype::kBytes, {}, std::vector<std::string>()};  // classes, masks as RLE
}

std::string MaskRleJson(const Detection& detection, const ImageDetections& image) {
  const data::Rle rle = DetectionMaskRle(detection, image);
  return Json{{"size", {image.height, image.width}}, {"counts", data::RleCountsToString(rle)}}
      .dump();
}

// Row `row` of `image` for a per-detection output: the detection's values, or padding
// beyond its detections.
void AppendRow(std::string_view name, const ImageDetections& image, size_t row,
               const V2ResponseSpec& spec, OutputTensor& out) {
  const bool real = row < image.detections.size();
  const Detection* detection = real ? &image.detections[row] : nullptr;
  if (name == "boxes") {
    auto& values = std::get<std::vector<float>>(out.values);
    for (int i = 0; i < 4; ++i) {
      values.push_back(real ? detection->box[static_cast<size_t>(i)] : 0.0f);
    }
  } else if (name == "scores") {
    std::get<std::vector<float>>(out.values).push_back(real ? detection->score : 0.0f);
  } else if (name == "labels") {
    std::get<std::vector<int64_t>>(out.values).push_back(real ? detection->category_id : -1);
  } else if (name == "classes") {
    std::get<std::vector<std::string>>(out.values).push_back(real ? detection->label : "");
  } else if (name == "keypoints") {
    auto& values = std::get<std::vector<float>>(out.values);
    if (real && detection->keypoints.size() != static_cast<size_t>(spec.keypoints)) {
      throw std::runtime_error(fmt::format("the predictor returned {} keypoints for a model of {}",
                                           detection->keypoints.size(), spec.keypoints));
    }
    for (int64_t k = 0; k < spec.keypoints; ++k) {
      for (size_t c = 0; c < 3; ++c) {
        values.push_back(real ? detection->keypoints[static_cast<size_t>(k)][c] : 0.0f);
      }
    }
  } else if (spec.mask_format == V2MaskFormat::kRle) {
    std::get<std::vector<std::string>>(out.values)
        .push_back(real ? MaskRleJson(*detection, image) : "");
  } else {
    auto& values = std::get<std::vector<uint8_t>>(out.values);
    const size_t pixels = static_cast<size_t>(image.height * image.width);
    if (real) {
      const std::vector<uint8_t> mask = data::DecodeMask(DetectionMaskRle(*detection, image));
      values.insert(values.end(), mask.begin(), mask.end());
    } else {
      values.resize(values.size() + pixels, 0);
    }
  }
}

void RequireOneMaskSize(const std::vector<ImageDetections>& images) {
  for (const ImageDetections& image : images) {
    if (image.height != images.front().height || image.width != images.front().width) {
      throw HttpError(
          400, "bad_request",
          fmt::format("masks=uint8 answers one [B, M, H, W] tensor, but the images "
                      "are {}x{} and {}x{}: send images of one size, one image per "
                      "request, or masks as RLE",
                      images.front().width, images.front().height, image.width, image.height));
    }
  }
}

// One output over every image, with its shape.
std::pair<OutputTensor, std::vector<int64_t>> BuildOutput(
    std::string_view name, const std::vector<ImageDetections>& images, const V2ResponseSpec& spec) {
  const ImageDetections& first = images.front();
  OutputTensor out = EmptyOutput(name, spec, first.height, first.width);
  const auto batch = static_cast<int64_t>(images.size());
  if (name == "num_detections") {
    for (const ImageDetections& image : images) {
      std::get<std::vector<int64_t>>(out.values)
          .push_back(static_cast<int64_t>(image.detections.size()));
    }
    return {std::move(out), {batch}};
  }
  size_t rows = 0;
  for (const ImageDetections& image : images) {
    rows = std::max(rows, image.detections.size());
  }
  std::vector<int64_t> shape;
  if (batch > 1) {
    shape.push_back(batch);
  }
  shape.push_back(static_cast<int64_t>(rows));
  shape.insert(shape.end(), out.row_shape.begin(), out.row_shape.end());
  for (const ImageDetections& image : images) {
    for (size_t row = 0; row < rows; ++row) {
      AppendRow(name, image, row, spec, out);
    }
  }
  return {std::move(out), std::move(shape)};
}

// The little-endian bytes of the binary extension.
void AppendBinary(const Values& values, std::string& out) {
  std::visit(
      [&out](const auto& list) {
        using T = typename std::decay_t<decltype(list)>::value_type;
        if constexpr (std::is_same_v<T, std::string>) {
          for (const std::string& element : list) {
            AppendV2BytesElement(out, element);
          }
        } else {
          out.append(reinterpret_cast<const char*>(list.data()), list.size() * sizeof(T));
        }
      },
      values);
}

}  // namespace

V2EncodedAnswer EncodeV2InferResponse(const std::vector<ImageDetections>& images,
                                      const V2ResponseSpec& spec) {
  if (images.empty()) {
    throw std::runtime_error("an infer response needs at least one image's detections");
  }
  Json outputs = Json::array();
  std::string binary;
  for (const V2RequestedOutput& requested : spec.outputs) {
    if (requested.name == "masks" && spec.mask_format == V2MaskFormat::kUint8) {
      RequireOneMaskSize(images);
    }
    auto [tensor, shape] = BuildOutput(requested.name, images, spec);
    Json item = {{"name", requested.name},
                 {"datatype", std::string(V2DatatypeName(tensor.datatype))},
                 {"shape", shape}};
    if (requested.binary) {
      const size_t before = binary.size();
      AppendBinary(tensor.values, binary);
      item["parameters"] = {{"binary_data_size", binary.size() - before}};
    } else {
      std::visit([&item](const auto& list) { item["data"] = list; }, tensor.values);
    }
    outputs.push_back(std::move(item));
  }
  Json answer = {{"model_name", spec.model_name}, {"model_version", spec.model_version}};
  if (!spec.id.is_null()) {
    answer["id"] = spec.id;
  }
  answer["outputs"] = std::move(outputs);
  V2EncodedAnswer encoded{answer.dump(-1, ' ', false, Json::error_handler_t::replace), {}};
  const bool any_binary = std::any_of(spec.outputs.begin(), spec.outputs.end(),
                                      [](const V2RequestedOutput& o) { return o.binary; });
  if (any_binary) {
    encoded.header_length = encoded.body.size();
    encoded.body += binary;
  }
  return encoded;
}

}  // namespace mrcnn::serving
