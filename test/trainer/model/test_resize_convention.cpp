// Where images are resized, by convention: torchvision's models resize in Transform (one size
// drawn per image in training, by INPUT.MIN_SIZE_TRAIN_SAMPLING); Detectron2's never do (the
// data pipeline or AddModelInput resized them once, Pillow's bilinear on uint8, as
// Detectron2's mapper and DefaultPredictor do), and its outputs come back in the caller's
// sizes.
#include <torch/torch.h>
#include <yaml-cpp/yaml.h>

#include <catch2/catch.hpp>
#include <set>

#include "test/trainer/model/small_model_config.h"
#include "trainer/data/pil_bilinear_resize.h"
#include "trainer/model/config.h"
#include "trainer/model/inference/model_input.h"
#include "trainer/model/meta_arch/meta_arch.h"

using namespace mrcnn::model;

namespace {

// A narrow Detectron2 R-50-FPN with `input` as its INPUT section.
ModelConfig NarrowDetectron2(const std::string& input) {
  return ModelConfig::FromYaml(
      YAML::Load("MODEL: {MASK_ON: true, BACKBONE: {NAME: build_resnet_fpn_backbone}, RESNETS: "
                 "{DEPTH: 50, "
                 "STEM_OUT_CHANNELS: 8, RES2_OUT_CHANNELS: 32, WIDTH_PER_GROUP: 8}, FPN: "
                 "{OUT_CHANNELS: 16}, ROI_HEADS: {NUM_CLASSES: 3}, ROI_BOX_HEAD: {FC_DIM: 32}, "
                 "ROI_MASK_HEAD: {CONV_DIM: 8}}\nINPUT: " +
                 input),
      "d2.yaml");
}

std::vector<ImageTarget> OneBoxTargets(int64_t h, int64_t w) {
  std::vector<ImageTarget> targets(1);
  targets[0].boxes = torch::tensor({{4.f, 6.f, 30.f, 40.f}});
  targets[0].labels = torch::tensor({1}, torch::kLong);
  targets[0].masks = torch::ones({1, h, w}, torch::kByte);
  return targets;
}

}  // namespace

TEST_CASE("INPUT.MIN_SIZE_TRAIN_SAMPLING is read, written back and checked", "[config][resize]") {
  const ModelConfig ranged = NarrowDetectron2(
      "{MIN_SIZE_TRAIN: [640, 864], "
      "MIN_SIZE_TRAIN_SAMPLING: range}");
  CHECK(ranged.min_size_train_sampling == "range");
  CHECK(ModelConfig::FromYaml(YAML::Load(ranged.ToYaml()), "again").min_size_train_sampling ==
        "range");
  CHECK(NarrowDetectron2("{MIN_SIZE_TEST: 800}").min_size_train_sampling == "choice");
  CHECK_THROWS_WITH(NarrowDetectron2("{MIN_SIZE_TRAIN_SAMPLING: uniform}"),
                    Catch::Contains("d2.yaml") &&
                        Catch::Contains("INPUT.MIN_SIZE_TRAIN_SAMPLING") &&
                        Catch::Contains("got \"uniform\""));
  CHECK_THROWS_WITH(NarrowDetectron2("{MIN_SIZE_TRAIN: [640, 672, 704], "
                                     "MIN_SIZE_TRAIN_SAMPLING: range}"),
                    Catch::Contains("INPUT.MIN_SIZE_TRAIN") && Catch::Contains("[low, high]"));
}

TEST_CASE("Detectron2's models take images and targets as given, in training too",
          "[transform][resize]") {
  auto model = BuildModel(NarrowDetectron2("{MIN_SIZE_TRAIN: [640, 800], MIN_SIZE_TEST: 100}"));
  for (bool training : {true, false}) {
    INFO("training " << training);
    model->train(training);
    std::vector<ImageTarget> targets = OneBoxTargets(70, 90);
    const ImageBatch batch = model->Transform({torch::rand({3, 70, 90})}, &targets);
    CHECK(batch.image_sizes[0] == std::array<int64_t, 2>{70, 90});
    CHECK(batch.original_sizes[0] == std::array<int64_t, 2>{70, 90});
    CHECK(batch.tensors.sizes() == at::IntArrayRef({1, 3, 96, 96}));
    CHECK(torch::equal(targets[0].boxes, torch::tensor({{4.f, 6.f, 30.f, 40.f}})));
    CHECK(targets[0].masks.sizes() == at::IntArrayRef({1, 70, 90}));
  }
}

TEST_CASE("torchvision's models draw one training size per image, from a range too",
          "[transform][resize]") {
  ModelConfig c = mrcnn::test::SmallModelConfig();
  c.min_size_train = {32, 36};  // k / 64 is exact: floor(64 * k / 64) = k
  c.min_size_train_sampling = "range";
  auto model = BuildModel(c);
  model->train();
  std::set<int64_t> heights;
  for (int i = 0; i < 60; ++i) {
    std::vector<ImageTarget> targets = OneBoxTargets(64, 128);
    const ImageBatch batch = model->Transform({torch::rand({3, 64, 128})}, &targets);
    heights.insert(batch.image_sizes[0][0]);
    CHECK(targets[0].masks.size(1) == batch.image_sizes[0][0]);
  }
  CHECK(heights == std::set<int64_t>{32, 33, 34, 35, 36});
}

TEST_CASE("inference inputs are resized like DefaultPredictor under Detectron2's convention",
          "[inference][resize]") {
  const ModelConfig d2 = NarrowDetectron2("{MIN_SIZE_TEST: 64, MAX_SIZE_TEST: 100}");
  const at::Tensor image = torch::randint(0, 256, {140, 120, 3}, torch::kByte);
  // A tile: a view with the larger image's row stride.
  const at::Tensor hwc = image.slice(0, 6, 134).slice(1, 10, 106);
  ModelInputs inputs;
  AddModelInput(d2, hwc, c10::Device(c10::kCPU), inputs);
  // ResizeShortestEdge(64, 100) of 128 x 96: 85.33 x 64 -> 85 x 64.
  REQUIRE(inputs.images[0].sizes() == at::IntArrayRef({3, 85, 64}));
  CHECK(inputs.output_sizes[0] == std::array<int64_t, 2>{128, 96});
  const at::Tensor copy = hwc.contiguous();
  at::Tensor want = at::empty({85, 64, 3}, torch::kByte);
  mrcnn::data::ResizeBilinearLikePil({copy.data_ptr<uint8_t>(), 128, 96, 3, 96 * 3},
                                     {want.data_ptr<uint8_t>(), 85, 64, 3, 64 * 3});
  CHECK(torch::equal(inputs.images[0], want.permute({2, 0, 1}).to(torch::kFloat).div_(255.0)));
  // Already at its size: the pixels as they are.
  AddModelInput(d2, image.slice(0, 0, 64).slice(1, 0, 80), c10::Device(c10::kCPU), inputs);
  CHECK(torch::equal(
      inputs.images[1],
      image.slice(0, 0, 64).slice(1, 0, 80).permute({2, 0, 1}).to(torch::kFloat) / 255.0));
  // torchvision's convention: the model's Transform resizes, the input is the image.
  AddModelInput(mrcnn::test::SmallModelConfig(), hwc, c10::Device(c10::kCPU), inputs);
  CHECK(inputs.images[2].sizes() == at::IntArrayRef({3, 128, 96}));
  CHECK(inputs.output_sizes[2] == std::array<int64_t, 2>{128, 96});
}

TEST_CASE("outputs are scaled back to the output sizes as detector_postprocess does",
          "[inference][resize]") {
  auto model = BuildModel(NarrowDetectron2("{MIN_SIZE_TEST: 64, MAX_SIZE_TEST: 100}"));
  model->eval();
  // The model saw 64 x 96; the caller's image was 128 x 192.
  const ImageBatch batch{at::Tensor(), {{64, 96}}, {{128, 192}}};
  std::vector<ImageResult> results(1);
  results[0].boxes =
      torch::tensor({{10.f, 8.f, 50.f, 40.f}, {90.f, 0.f, 100.f, 64.f}, {96.f, 10.f, 99.f, 20.f}});
  results[0].scores = torch::tensor({0.9f, 0.8f, 0.7f});
  results[0].labels = torch::tensor({1, 2, 3}, torch::kLong);
  results[0].masks = torch::ones({3, 1, 28, 28});
  results[0].keypoints =
      torch::tensor({{{20.f, 30.f, 1.f}}, {{95.f, 5.f, 1.f}}, {{97.f, 15.f, 1.f}}});
  model->Postprocess(batch, results);
  const ImageResult& r = results[0];
  // Scaled by 2, clipped to the 128 x 192 output; the third box is empty after the clip.
  CHECK(torch::equal(r.boxes,
                     torch::tensor({{20.f, 16.f, 100.f, 80.f}, {180.f, 0.f, 192.f, 128.f}})));
  CHECK(torch::equal(r.scores, torch::tensor({0.9f, 0.8f})));
  CHECK(torch::equal(r.keypoints, torch::tensor({{{40.f, 60.f, 1.f}}, {{190.f, 10.f, 1.f}}})));
  REQUIRE(r.masks.sizes() == at::IntArrayRef({2, 1, 128, 192}));
  CHECK(r.masks[0][0][40][50].item<float>() > 0.5f);  // pasted in the output's pixels
  CHECK(r.masks[0][0][100][150].item<float>() == 0.0f);
  // forward() takes one output size per image.
  CHECK_THROWS_WITH(model->forward({torch::rand({3, 64, 96})}, std::nullopt,
                                   std::vector<std::array<int64_t, 2>>{{128, 192}, {1, 1}}),
                    Catch::Contains("2 output sizes for 1 images"));
}
