// The Open Inference Protocol's request parsing and answer encoding (serving/codec/v2_*):
// JSON and binary tensors, what a detector takes and answers, and every 400 the route gives
// for a bad request.
#include <boost/beast/http/message.hpp>
#include <catch2/catch.hpp>
#include <cstring>
#include <nlohmann/json.hpp>

#include "serving/codec/base64.h"
#include "serving/codec/response_encoding.h"
#include "serving/codec/v2_detector_request.h"
#include "serving/codec/v2_metadata_encoding.h"
#include "serving/codec/v2_request_decoding.h"
#include "serving/codec/v2_response_encoding.h"
#include "serving/codec/v2_tensor.h"
#include "serving/http/http_error.h"
#include "serving/routes/v2_infer_route.h"
#include "trainer/data/mask_rle.h"

using namespace mrcnn::serving;
using Json = nlohmann::json;

namespace {

std::vector<uint8_t> Bytes(const std::string& s) {
  return {s.begin(), s.end()};
}

// The HttpError's status and detail of f(), or 0 when it throws none.
std::pair<unsigned, std::string> ErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const HttpError& e) {
    return {e.status(), e.detail()};
  }
  return {0, ""};
}

// A binary-extension body: the JSON header, then `binary`; with its header length.
std::pair<std::vector<uint8_t>, size_t> BinaryBody(const Json& header, const std::string& binary) {
  const std::string text = header.dump();
  return {Bytes(text + binary), text.size()};
}

std::string LengthPrefixed(const std::vector<std::string>& elements) {
  std::string out;
  for (const auto& element : elements) {
    AppendV2BytesElement(out, element);
  }
  return out;
}

const PredictorOutputs kMaskModel{true, 0, "test"};

V2DetectorRequest Interpret(const Json& request, const PredictorOutputs& model = kMaskModel) {
  const std::vector<uint8_t> body = Bytes(request.dump());
  return InterpretV2DetectorRequest(ParseV2InferRequest(body, std::nullopt), model, {});
}

Json PixelInput(std::vector<int64_t> shape, Json data) {
  return {{"inputs",
           {{{"name", "image_rgb"}, {"datatype", "UINT8"}, {"shape", shape}, {"data", data}}}}};
}

ImageDetections TwoDetections() {
  ImageDetections image{4, 6, {}, true};
  Detection a{{1, 1, 3, 3}, 7, "cat", 0.9f, std::vector<uint8_t>(24, 0), {}, {}, {}};
  a.mask[1 * 6 + 1] = 1;
  Detection b{{0, 0, 6, 4}, 9, "dog", 0.4f, std::vector<uint8_t>(24, 1), {}, {}, {}};
  image.detections = {a, b};
  return image;
}

const Json& Output(const Json& answer, const std::string& name) {
  for (const Json& output : answer["outputs"]) {
    if (output["name"] == name) {
      return output;
    }
  }
  throw std::runtime_error("no output " + name);
}

}  // namespace

TEST_CASE("V2 datatypes by their protocol names", "[serving][v2]") {
  REQUIRE(ParseV2Datatype("FP32") == V2Datatype::kFp32);
  REQUIRE(ParseV2Datatype("BYTES") == V2Datatype::kBytes);
  REQUIRE(V2DatatypeName(V2Datatype::kInt64) == "INT64");
  REQUIRE(V2ElementSize(V2Datatype::kFp64) == 8);
  REQUIRE(V2ElementSize(V2Datatype::kBytes) == 0);
  REQUIRE_FALSE(ParseV2Datatype("fp32"));  // the protocol spells them in capitals
  REQUIRE_FALSE(ParseV2Datatype("FLOAT"));
}

TEST_CASE("V2 BYTES elements: length-prefixed, truncation and leftovers refused", "[serving][v2]") {
  const std::string data = LengthPrefixed({"ab", "", "xyz"});
  REQUIRE(data.size() == 4 * 3 + 5);
  const std::vector<uint8_t> bytes = Bytes(data);
  const auto elements = SplitV2BytesElements(bytes, 3, "image");
  REQUIRE(elements.size() == 3);
  REQUIRE(std::string(elements[0].begin(), elements[0].end()) == "ab");
  REQUIRE(elements[1].empty());
  REQUIRE(std::string(elements[2].begin(), elements[2].end()) == "xyz");

  const std::span<const uint8_t> all(bytes);
  REQUIRE(ErrorOf([&] { SplitV2BytesElements(all.first(all.size() - 1), 3, "image"); }).first ==
          400);  // element
  REQUIRE(ErrorOf([&] { SplitV2BytesElements(all.first(2), 1, "image"); }).first == 400);  // length
  REQUIRE(ErrorOf([&] { SplitV2BytesElements(all, 2, "image"); }).second.find("follow") !=
          std::string::npos);  // bytes left over
  REQUIRE(ErrorOf([&] { SplitV2BytesElements(all, 4, "image"); }).first == 400);
}

TEST_CASE("V2 JSON requests: members read, unknown ones tolerated", "[serving][v2]") {
  const Json request = {
      {"id", "req-7"},
      {"unknown_member", {1, 2}},
      {"parameters", {{"binary_data_output", true}, {"someone_elses", "x"}}},
      {"inputs",
       {{{"name", "image"},
         {"shape", {1}},
         {"datatype", "BYTES"},
         {"data", {"aGk="}},
         {"extra", true}}}},
      {"outputs",
       {{{"name", "boxes"}}, {{"name", "scores"}, {"parameters", {{"binary_data", false}}}}}}};
  const std::vector<uint8_t> body = Bytes(request.dump());
  const V2InferRequest parsed = ParseV2InferRequest(body, std::nullopt);
  REQUIRE(parsed.id == "req-7");
  REQUIRE(parsed.binary_data_output);
  REQUIRE(parsed.inputs.size() == 1);
  REQUIRE(parsed.inputs[0].datatype == V2Datatype::kBytes);
  REQUIRE(parsed.inputs[0].shape == std::vector<int64_t>{1});
  REQUIRE_FALSE(parsed.inputs[0].binary);
  REQUIRE(parsed.outputs ==
          std::vector<V2RequestedOutput>{{"boxes", true}, {"scores", false}});  // default, own
}

TEST_CASE("V2 binary requests: the tail split by binary_data_size, truncation refused",
          "[serving][v2]") {
  const std::string blob = LengthPrefixed({"JPEGBYTES"});
  const Json header = {{"inputs",
                        {{{"name", "image"},
                          {"shape", {1}},
                          {"datatype", "BYTES"},
                          {"parameters", {{"binary_data_size", blob.size()}}}}}}};
  auto [body, length] = BinaryBody(header, blob);
  const V2InferRequest parsed = ParseV2InferRequest(body, length);
  REQUIRE(parsed.inputs[0].binary);
  REQUIRE(parsed.inputs[0].binary->size() == blob.size());

  const std::span<const uint8_t> all(body);
  auto truncated = all.first(all.size() - 3);
  auto [status, detail] = ErrorOf([&] { ParseV2InferRequest(truncated, length); });
  REQUIRE(status == 400);
  REQUIRE(detail.find("truncated") != std::string::npos);
  std::vector<uint8_t> longer = body;
  longer.push_back('x');
  REQUIRE(ErrorOf([&] { ParseV2InferRequest(longer, length); }).first == 400);
  REQUIRE(ErrorOf([&] { ParseV2InferRequest(body, body.size() + 1); }).first == 400);
  REQUIRE(ErrorOf([&] { ParseV2InferRequest(body, std::nullopt); }).first == 400);  // not JSON
  REQUIRE(ErrorOf([&] { ParseV2HeaderLength("12a"); }).first == 400);
  REQUIRE(ParseV2HeaderLength("") == std::nullopt);
  REQUIRE(ParseV2HeaderLength("42") == 42u);
}

TEST_CASE("V2 request structure errors are 400s naming the member", "[serving][v2]") {
  auto status = [](const std::string& text) {
    const std::vector<uint8_t> body = Bytes(text);
    return ErrorOf([&] { ParseV2InferRequest(body, std::nullopt); });
  };
  REQUIRE(status("{not json").first == 400);
  REQUIRE(status("[]").first == 400);
  REQUIRE(status("{}").second.find("inputs") != std::string::npos);
  REQUIRE(status(R"({"inputs": [{"name": "image", "datatype": "BYTES", "shape": [1.5],
                   "data": ["x"]}]})")
              .second.find("shape") != std::string::npos);
  REQUIRE(status(R"({"inputs": [{"name": "image", "datatype": "BYTES", "shape": [-1],
                   "data": ["x"]}]})")
              .first == 400);
  REQUIRE(status(R"({"inputs": [{"name": "image", "datatype": "STRING", "shape": [1],
                   "data": ["x"]}]})")
              .second.find("datatype") != std::string::npos);
  REQUIRE(status(R"({"inputs": [{"name": "image", "datatype": "BYTES", "shape": [1]}]})")
              .second.find("data") != std::string::npos);
  REQUIRE(status(R"({"inputs": [], "outputs": [{"name": "boxes",
                   "parameters": {"binary_data": "yes"}}]})")
              .first == 400);
}

TEST_CASE("V2 header length: the field name in any case", "[serving][v2]") {
  for (const char* name : {"Inference-Header-Content-Length", "inference-header-content-length",
                           "INFERENCE-HEADER-CONTENT-LENGTH"}) {
    boost::beast::http::request_header<> fields;
    fields.set(name, "17");
    REQUIRE(V2HeaderLengthOf(fields) == 17u);
  }
  boost::beast::http::request_header<> none;
  REQUIRE(V2HeaderLengthOf(none) == std::nullopt);
}

TEST_CASE("V2 detector inputs: base64 JSON images, binary BYTES, UINT8 pixels", "[serving][v2]") {
  const std::string jpeg = "\xFF\xD8 not really";
  const std::string b64 = EncodeBase64(reinterpret_cast<const uint8_t*>(jpeg.data()), jpeg.size());
  const V2DetectorRequest json_images = Interpret(
      {{"inputs",
        {{{"name", "image"}, {"datatype", "BYTES"}, {"shape", {2}}, {"data", {b64, b64}}}}}});
  REQUIRE(json_images.encoded.size() == 2);
  REQUIRE(std::string(json_images.encoded[1].begin(), json_images.encoded[1].end()) == jpeg);
  REQUIRE(json_images.outputs.size() == 6);  // boxes scores labels classes masks num_detections

  const std::string blob = LengthPrefixed({jpeg, "second"});
  auto [body, length] = BinaryBody({{"inputs",
                                     {{{"name", "image"},
                                       {"datatype", "BYTES"},
                                       {"shape", {2, 1}},
                                       {"parameters", {{"binary_data_size", blob.size()}}}}}}},
                                   blob);
  const V2DetectorRequest binary =
      InterpretV2DetectorRequest(ParseV2InferRequest(body, length), kMaskModel, {});
  REQUIRE(binary.encoded.size() == 2);
  REQUIRE(std::string(binary.encoded[1].begin(), binary.encoded[1].end()) == "second");

  // Nested and flat data alike; one [H, W, 3] image.
  const V2DetectorRequest nested = Interpret(PixelInput({1, 2, 3}, {{{1, 2, 3}, {4, 5, 6}}}));
  REQUIRE(nested.pixels.size() == 1);
  REQUIRE(nested.pixels[0].height == 1);
  REQUIRE(nested.pixels[0].width == 2);
  REQUIRE(nested.pixels[0].pixels == std::vector<uint8_t>{1, 2, 3, 4, 5, 6});
  const V2DetectorRequest two = Interpret(PixelInput({2, 1, 1, 3}, {1, 2, 3, 4, 5, 6}));
  REQUIRE(two.pixels.size() == 2);
  REQUIRE(two.pixels[1].pixels == std::vector<uint8_t>{4, 5, 6});
}

TEST_CASE("V2 detector refusals: wrong datatype, shape, sizes, names", "[serving][v2]") {
  auto detail = [](const Json& request) {
    auto [status, what] = ErrorOf([&] { Interpret(request); });
    REQUIRE(status == 400);
    return what;
  };
  auto image = [](const char* datatype, std::vector<int64_t> shape, Json data) {
    return Json{{"inputs",
                 {{{"name", "image"}, {"datatype", datatype}, {"shape", shape}, {"data", data}}}}};
  };
  REQUIRE(detail(image("FP32", {1}, {1.0})).find("must be BYTES") != std::string::npos);
  Json int32_pixels = PixelInput({1, 1, 3}, {1, 2, 3});
  int32_pixels["inputs"][0]["datatype"] = "INT32";
  REQUIRE(detail(int32_pixels).find("must be UINT8") != std::string::npos);
  REQUIRE(detail(image("BYTES", {2, 2}, {"YQ==", "YQ==", "YQ==", "YQ=="})).find("shape") !=
          std::string::npos);
  REQUIRE(detail(image("BYTES", {2}, {"YQ=="})).find("elements") != std::string::npos);
  REQUIRE(detail(image("BYTES", {1}, {"not base64!"})).find("base64") != std::string::npos);
  REQUIRE(detail(image("BYTES", {1}, {7})).find("base64") != std::string::npos);
  REQUIRE(detail(image("BYTES", {0}, Json::array())).find("images") != std::string::npos);
  REQUIRE(detail(image("BYTES", {17}, std::vector<std::string>(17, "YQ=="))).find("images") !=
          std::string::npos);  // beyond --max-images-per-request
  Json as_str = image("BYTES", {1}, {"YQ=="});
  as_str["inputs"][0]["parameters"] = {{"content_type", "str"}};
  REQUIRE(detail(as_str).find("content_type") != std::string::npos);
  REQUIRE(detail(PixelInput({2, 2, 4}, std::vector<int>(16, 0))).find("shape") !=
          std::string::npos);
  REQUIRE(detail(PixelInput({1, 1, 3}, {1, 2, 300})).find("[0, 255]") != std::string::npos);
  REQUIRE(detail(PixelInput({1, 2, 3}, {1, 2, 3})).find("elements") != std::string::npos);
  Json unknown = image("BYTES", {1}, {"YQ=="});
  unknown["inputs"][0]["name"] = "input0";
  REQUIRE(detail(unknown).find("unknown input") != std::string::npos);
  Json twice = image("BYTES", {1}, {"YQ=="});
  twice["inputs"].push_back(twice["inputs"][0]);
  REQUIRE(detail(twice).find("exactly one") != std::string::npos);
  Json bad_output = image("BYTES", {1}, {"YQ=="});
  bad_output["outputs"] = {{{"name", "keypoints"}}};  // a model without a keypoint head
  REQUIRE(detail(bad_output).find("unknown output") != std::string::npos);

  // binary UINT8 whose binary_data_size does not match the shape
  auto [body, length] = BinaryBody({{"inputs",
                                     {{{"name", "image_rgb"},
                                       {"datatype", "UINT8"},
                                       {"shape", {2, 2, 3}},
                                       {"parameters", {{"binary_data_size", 11}}}}}}},
                                   std::string(11, '\0'));
  REQUIRE(ErrorOf([&] {
            InterpretV2DetectorRequest(ParseV2InferRequest(body, length), kMaskModel, {});
          }).second.find("binary_data_size") != std::string::npos);
}

TEST_CASE("V2 parameters set what the custom attributes set", "[serving][v2]") {
  Json request = PixelInput({1, 1, 3}, {1, 2, 3});
  request["parameters"] = {{"score_threshold", 0.5},
                           {"max_detections", "7"},
                           {"tile_full_image", true},
                           {"masks", "uint8"},
                           {"trace", "x"}};
  const V2DetectorRequest parsed = Interpret(request);
  REQUIRE(parsed.options.score_threshold == 0.5f);
  REQUIRE(parsed.options.max_detections == 7);
  REQUIRE(parsed.options.tile_full_image);
  REQUIRE(parsed.mask_format == V2MaskFormat::kUint8);

  request["parameters"] = {{"score_threshold", 1.5}};
  REQUIRE(ErrorOf([&] { Interpret(request); }).second.find("score_threshold") != std::string::npos);
  request["parameters"] = {{"masks", "polygons"}};
  REQUIRE(ErrorOf([&] { Interpret(request); }).first == 400);
  request["parameters"] = {{"tile_size", {1, 2}}};
  REQUIRE(ErrorOf([&] { Interpret(request); }).first == 400);

  // masks=none leaves the masks output out; naming it then is a contradiction
  request["parameters"] = {{"masks", "none"}};
  const V2DetectorRequest none = Interpret(request);
  REQUIRE_FALSE(none.options.masks);
  REQUIRE(std::none_of(none.outputs.begin(), none.outputs.end(),
                       [](const V2RequestedOutput& o) { return o.name == "masks"; }));
  request["outputs"] = {{{"name", "masks"}}};
  REQUIRE(ErrorOf([&] { Interpret(request); }).first == 400);
  // outputs without "masks": the model runs without masks
  request["parameters"] = Json::object();
  request["outputs"] = {{{"name", "scores"}}, {{"name", "boxes"}}};
  const V2DetectorRequest two = Interpret(request);
  REQUIRE_FALSE(two.options.masks);
  REQUIRE(two.outputs == std::vector<V2RequestedOutput>{{"scores", false}, {"boxes", false}});
}

TEST_CASE("V2 answers: one image's JSON tensors", "[serving][v2]") {
  const ImageDetections image = TwoDetections();
  V2ResponseSpec spec{"model", "1", "req-1", {}, V2MaskFormat::kRle, 0};
  for (const char* name : {"boxes", "scores", "labels", "classes", "masks", "num_detections"}) {
    spec.outputs.push_back({name, false});
  }
  const V2EncodedAnswer encoded = EncodeV2InferResponse({image}, spec);
  REQUIRE_FALSE(encoded.header_length);
  const Json answer = Json::parse(encoded.body);
  REQUIRE(answer["model_name"] == "model");
  REQUIRE(answer["model_version"] == "1");
  REQUIRE(answer["id"] == "req-1");
  REQUIRE(Output(answer, "boxes")["datatype"] == "FP32");
  REQUIRE(Output(answer, "boxes")["shape"] == Json{2, 4});
  REQUIRE(Output(answer, "boxes")["data"] == Json{1, 1, 3, 3, 0, 0, 6, 4});
  REQUIRE(Output(answer, "scores")["shape"] == Json{2});
  REQUIRE(Output(answer, "labels")["datatype"] == "INT64");
  REQUIRE(Output(answer, "labels")["data"] == Json{7, 9});
  REQUIRE(Output(answer, "classes")["data"] == Json{"cat", "dog"});
  REQUIRE(Output(answer, "num_detections")["data"] == Json{2});
  // masks: the /invocations answer's RLE object, as a JSON string
  const Json mask = Json::parse(Output(answer, "masks")["data"][0].get<std::string>());
  REQUIRE(mask["size"] == Json{4, 6});
  REQUIRE(mask["counts"] ==
          mrcnn::data::RleCountsToString(DetectionMaskRle(image.detections[0], image)));
}

TEST_CASE("V2 answers: several images padded, binary outputs after the header", "[serving][v2]") {
  ImageDetections empty{4, 6, {}, true};
  V2ResponseSpec spec{
      "m",
      "1",
      nullptr,
      {{"scores", true}, {"labels", false}, {"classes", true}, {"num_detections", true}},
      V2MaskFormat::kRle,
      0};
  const V2EncodedAnswer encoded = EncodeV2InferResponse({TwoDetections(), empty}, spec);
  REQUIRE(encoded.header_length);
  const Json answer = Json::parse(encoded.body.substr(0, *encoded.header_length));
  REQUIRE_FALSE(answer.contains("id"));
  REQUIRE(Output(answer, "scores")["shape"] == Json{2, 2});
  REQUIRE(Output(answer, "labels")["data"] == Json{7, 9, -1, -1});  // padded with -1
  const std::string binary = encoded.body.substr(*encoded.header_length);
  const size_t scores = Output(answer, "scores")["parameters"]["binary_data_size"];
  const size_t classes = Output(answer, "classes")["parameters"]["binary_data_size"];
  const size_t counts = Output(answer, "num_detections")["parameters"]["binary_data_size"];
  REQUIRE(scores == 4 * sizeof(float));
  REQUIRE(counts == 2 * sizeof(int64_t));
  REQUIRE(binary.size() == scores + classes + counts);
  float values[4];
  std::memcpy(values, binary.data(), sizeof(values));
  REQUIRE(values[0] == 0.9f);
  REQUIRE(values[1] == 0.4f);
  REQUIRE(values[2] == 0.0f);
  const std::vector<uint8_t> class_bytes(
      binary.begin() + static_cast<std::ptrdiff_t>(scores),
      binary.begin() + static_cast<std::ptrdiff_t>(scores + classes));
  const auto names = SplitV2BytesElements(class_bytes, 4, "classes");
  REQUIRE(std::string(names[1].begin(), names[1].end()) == "dog");
  REQUIRE(names[2].empty());
  int64_t detections[2];
  std::memcpy(detections, binary.data() + scores + classes, sizeof(detections));
  REQUIRE(detections[0] == 2);
  REQUIRE(detections[1] == 0);
}

TEST_CASE("V2 answers: UINT8 masks and keypoints", "[serving][v2]") {
  ImageDetections image = TwoDetections();
  for (Detection& detection : image.detections) {
    detection.keypoints = {{1, 2, 0.5f}, {3, 4, 0.25f}};
  }
  V2ResponseSpec spec{
      "m", "1", nullptr, {{"masks", false}, {"keypoints", false}}, V2MaskFormat::kUint8, 2};
  const Json answer = Json::parse(EncodeV2InferResponse({image}, spec).body);
  REQUIRE(Output(answer, "masks")["datatype"] == "UINT8");
  REQUIRE(Output(answer, "masks")["shape"] == Json{2, 4, 6});
  const Json& pixels = Output(answer, "masks")["data"];
  REQUIRE(pixels.size() == 48);
  REQUIRE(pixels[7] == 1);
  REQUIRE(pixels[0] == 0);
  REQUIRE(pixels[47] == 1);
  REQUIRE(Output(answer, "keypoints")["shape"] == Json{2, 2, 3});
  REQUIRE(Output(answer, "keypoints")["data"][4] == 4.0);

  ImageDetections other{5, 6, {}, true};  // another size: no one [B, M, H, W] tensor
  REQUIRE(ErrorOf([&] { EncodeV2InferResponse({image, other}, spec); }).first == 400);
  spec.outputs = {{"keypoints", false}};
  const Json none = Json::parse(EncodeV2InferResponse({other}, spec).body);
  REQUIRE(Output(none, "keypoints")["shape"] == Json{0, 2, 3});
}

TEST_CASE("V2 metadata: the model's inputs and outputs", "[serving][v2]") {
  const Json server = Json::parse(EncodeV2ServerMetadata("srv", "1.0"));
  REQUIRE(server["extensions"] == Json{"binary_tensor_data"});
  const Json keypoint_model = Json::parse(
      EncodeV2ModelMetadata("kp", {"1"}, PredictorOutputs{false, 17, "mrcnn_libtorch"}));
  REQUIRE(keypoint_model["name"] == "kp");
  REQUIRE(keypoint_model["versions"] == Json{"1"});
  REQUIRE(keypoint_model["platform"] == "mrcnn_libtorch");
  REQUIRE(keypoint_model["inputs"][0] ==
          Json{{"name", "image"}, {"datatype", "BYTES"}, {"shape", {-1}}});
  REQUIRE(keypoint_model["inputs"][1]["shape"] == Json{-1, -1, -1, 3});
  std::vector<std::string> names;
  for (const Json& output : keypoint_model["outputs"]) {
    names.push_back(output["name"]);
  }
  REQUIRE(names == std::vector<std::string>{"boxes", "scores", "labels", "classes", "keypoints",
                                            "num_detections"});
  REQUIRE(keypoint_model["outputs"][4]["shape"] == Json{-1, 17, 3});
  const Json mask_model = Json::parse(EncodeV2ModelMetadata("m", {"1"}, kMaskModel));
  REQUIRE(mask_model["outputs"][4] ==
          Json{{"name", "masks"}, {"datatype", "BYTES"}, {"shape", {-1}}});
}
