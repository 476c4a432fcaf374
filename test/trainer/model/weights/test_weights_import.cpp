// ImportDetectron2Weights into a LibTorch module: values land under our names (converted to
// float32, class layers re-laid out, missing norm statistics 0 and 1), misfitting shapes are
// skipped with a line, and a file with nothing for the model, or with NaN, is refused.
#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "test/trainer/model/weights/pickle_bytes.h"
#include "trainer/model/weights/weights_import.h"

using namespace mrcnn::model::weights;
using mrcnn::model::weights::test::FloatBytes;
using mrcnn::model::weights::test::PickleBytes;

namespace {

// A file under the temp dir, removed at scope end.
struct TempFile {
  std::filesystem::path path;
  explicit TempFile(const std::string& bytes) {
    std::random_device rd;
    path = std::filesystem::temp_directory_path() /
           ("weights_import_" + std::to_string(rd()) + ".pkl");
    std::ofstream(path, std::ios::binary) << bytes;
  }
  ~TempFile() { std::remove(path.c_str()); }
};

// A module whose state_dict names are `names` (dotted), each tensor of the given shape.
struct NamedModule : torch::nn::Module {
  void Add(const std::string& dotted, std::vector<int64_t> shape, bool buffer = false) {
    torch::nn::Module* module = this;
    std::string rest = dotted;
    for (size_t dot = rest.find('.'); dot != std::string::npos; dot = rest.find('.')) {
      const std::string child = rest.substr(0, dot);
      rest = rest.substr(dot + 1);
      auto children = module->named_children();
      auto* found = children.find(child);
      module = found != nullptr
                   ? found->get()
                   : module->register_module(child, std::make_shared<torch::nn::Module>()).get();
    }
    if (buffer) {
      module->register_buffer(rest, at::full(shape, 7.0f));
    } else {
      module->register_parameter(rest, at::full(shape, 7.0f));
    }
  }
  at::Tensor Get(const std::string& name) const {
    for (const auto& item : named_parameters())
      if (item.key() == name)
        return item.value();
    for (const auto& item : named_buffers())
      if (item.key() == name)
        return item.value();
    FAIL("no " << name);
    return {};
  }
};

// A Detectron2 model zoo .pkl: stem conv and norm (scale and shift only), an fp16 classifier
// with background last, a box regressor our test model lacks.
// `extra`: further keys with one float each (blocks the model does not build).
std::string ZooPickle(float stem_bias = 0.5f, const std::vector<std::string>& extra = {}) {
  PickleBytes p;
  p.Proto(2).Op('}').Mark().Py2Str("model").Op('}').Mark();
  p.Py2Str("backbone.bottom_up.stem.conv1.weight")
      .NumpyArray({2, 3, 1, 1}, "f4", FloatBytes({0, 1, 2, 3, 4, 5}));
  p.Py2Str("backbone.bottom_up.stem.conv1.norm.weight").NumpyArray({2}, "f4", FloatBytes({2, 3}));
  p.Py2Str("backbone.bottom_up.stem.conv1.norm.bias")
      .NumpyArray({2}, "f4", FloatBytes({stem_bias, -1}));
  // float16 rows [1, 1], [2, 2], [-3, -3]: 0x3c00 = 1, 0x4000 = 2, 0xc200 = -3
  p.Py2Str("roi_heads.box_predictor.cls_score.weight")
      .NumpyArray({3, 2}, "f2",
                  std::string("\x00\x3c\x00\x3c\x00\x40\x00\x40\x00\xc2\x00\xc2", 12));
  p.Py2Str("roi_heads.box_predictor.bbox_pred.weight")
      .NumpyArray({8, 2}, "f4", FloatBytes(std::vector<float>(16, 1)));
  for (const std::string& key : extra)
    p.Py2Str(key).NumpyArray({1}, "f4", FloatBytes({1}));
  p.Op('u').Py2Str("__author__").Py2Str("test").Op('u').Stop();
  return p.bytes();
}

void AddModelTensors(NamedModule& model, int64_t classes_with_background) {
  model.Add("backbone.body.conv1.weight", {2, 3, 1, 1});
  model.Add("backbone.body.bn1.weight", {2}, true);
  model.Add("backbone.body.bn1.bias", {2}, true);
  model.Add("backbone.body.bn1.running_mean", {2}, true);
  model.Add("backbone.body.bn1.running_var", {2}, true);
  model.Add("roi_heads.box_predictor.cls_score.weight", {classes_with_background, 2});
  model.Add("roi_heads.mask_head.0.0.weight", {1});
}

}  // namespace

TEST_CASE("a Detectron2 checkpoint lands in the model under our names", "[import]") {
  const TempFile file(ZooPickle());
  NamedModule model;
  AddModelTensors(model, 3);
  std::ostringstream log;
  const WeightImportSummary summary = ImportDetectron2Weights(file.path, model, log);
  CHECK(summary.loaded == 6);  // 4 from the file, 2 norm statistics filled in
  CHECK(summary.model_tensors == 7);
  CHECK(summary.unknown == 1);
  CHECK(summary.missing == 1);
  CHECK(at::equal(model.Get("backbone.body.conv1.weight").flatten(), at::arange(6, at::kFloat)));
  CHECK(model.Get("backbone.body.bn1.bias")[0].item<float>() == 0.5f);
  CHECK(at::equal(model.Get("backbone.body.bn1.running_mean"), at::zeros({2})));
  CHECK(at::equal(model.Get("backbone.body.bn1.running_var"), at::ones({2})));
  const at::Tensor cls = model.Get("roi_heads.box_predictor.cls_score.weight");
  CHECK(cls.dtype() == at::kFloat);
  CHECK(at::equal(cls.select(1, 0), at::tensor({-3.0f, 1.0f, 2.0f})));  // background moved first
  CHECK(model.Get("backbone.body.conv1.weight").requires_grad());       // still a parameter
  CHECK(model.Get("roi_heads.mask_head.0.0.weight").item<float>() == 7.0f);  // not in the file
  const std::string text = log.str();
  CHECK_THAT(text, Catch::Contains("[weights] loaded 6 of 7 tensors of the model from " +
                                   file.path.string() +
                                   " (Detectron2 checkpoint, pickle, __author__ 'test'"));
  CHECK_THAT(text, Catch::Contains("1 keys of the file match nothing in the model:\n[weights]   "
                                   "roi_heads.box_predictor.bbox_pred.weight -> "
                                   "roi_heads.box_predictor.bbox_pred.weight (not in the model)"));
  CHECK_THAT(text,
             Catch::Contains("running_mean/running_var buffers of norms are not in the file"));
}

TEST_CASE("a classifier of other classes is skipped with a line, the rest loads", "[import]") {
  const TempFile file(ZooPickle());
  NamedModule model;
  AddModelTensors(model, 5);
  std::ostringstream log;
  const WeightImportSummary summary = ImportDetectron2Weights(file.path, model, log);
  CHECK(summary.shape_skipped == 1);
  CHECK(summary.loaded == 5);
  CHECK(model.Get("roi_heads.box_predictor.cls_score.weight").sum().item<float>() == 70.0f);
  CHECK_THAT(log.str(),
             Catch::Contains(
                 "[weights] skipped roi_heads.box_predictor.cls_score.weight: shape [3, 2] in "
                 "the file (as roi_heads.box_predictor.cls_score.weight), [5, 2] in the model\n"));
}

TEST_CASE("the state dict alone, without touching the model", "[import]") {
  const TempFile file(ZooPickle());
  NamedModule model;
  AddModelTensors(model, 3);
  std::ostringstream log;
  const auto tensors = ReadDetectron2StateDict(file.path, model, log);
  CHECK(tensors.size() == 6);
  CHECK(tensors.at("backbone.body.bn1.weight").dtype() == at::kFloat);
  CHECK(model.Get("backbone.body.bn1.weight")[0].item<float>() == 7.0f);
}

TEST_CASE("files with nothing for the model, or with NaN, are refused with the file named",
          "[import]") {
  const TempFile file(ZooPickle());
  NamedModule other;
  other.Add("head.weight", {1});
  std::ostringstream log;
  CHECK_THROWS_WITH(
      ImportDetectron2Weights(file.path, other, log),
      Catch::StartsWith(file.path.string() + ": no tensor of the checkpoint fits the model"));
  const TempFile nan(ZooPickle(std::numeric_limits<float>::quiet_NaN()));
  NamedModule model;
  AddModelTensors(model, 3);
  CHECK_THROWS_WITH(
      ImportDetectron2Weights(nan.path, model, log),
      Catch::StartsWith(nan.path.string() +
                        ": tensor 'backbone.bottom_up.stem.conv1.norm.bias' holds NaN"));
  CHECK(model.Get("backbone.body.conv1.weight").sum().item<float>() == 42.0f);  // nothing copied
}

TEST_CASE("a tensor of a block the model builds otherwise fails the load, naming it", "[import]") {
  // A deformable convolution's offsets (Misc/mask_rcnn_R_50_FPN_1x_dconv_c3-c5's
  // conv2_offset) inside a part the model has: loading the rest would predict as if res3-res5
  // were plain, so the load is refused.
  // The model's res3 block is plain (it has the block, not its offset conv).
  const TempFile file(ZooPickle(0.5f, {"backbone.bottom_up.res3.0.conv2_offset.weight",
                                       "backbone.bottom_up.res3.0.conv2_offset.bias"}));
  NamedModule model;
  AddModelTensors(model, 3);
  model.Add("backbone.body.layer2.0.conv2.weight", {1});
  model.Add("roi_heads.box_predictor.bbox_pred.weight", {12, 2});  // beside cls_score, as a model has it
  std::ostringstream log;
  CHECK_THROWS_WITH(ImportDetectron2Weights(file.path, model, log),
                    Catch::Contains(file.path.string()) &&
                        Catch::Contains("2 tensors of the checkpoint belong to blocks") &&
                        Catch::Contains("backbone.bottom_up.res3.0.conv2_offset") &&
                        Catch::Contains("MODEL.RESNETS.DEFORM_ON_PER_STAGE"));
  CHECK_THAT(log.str(), Catch::Contains("2 keys of the file belong to blocks this model builds "
                                        "otherwise"));
  CHECK(model.Get("roi_heads.mask_head.0.0.weight").item<float>() == 7.0f);  // nothing copied
  // Outside the model's parts an unknown key is reported and the rest loads, as before.
  const TempFile other(ZooPickle(0.5f, {"some_other_model.fc.weight"}));
  NamedModule loaded;
  AddModelTensors(loaded, 3);
  loaded.Add("roi_heads.box_predictor.bbox_pred.weight", {12, 2});
  std::ostringstream quiet;
  CHECK(ImportDetectron2Weights(other.path, loaded, quiet).unknown == 1);
}
