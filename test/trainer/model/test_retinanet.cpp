// RetinaNet (Detectron2's) built from a config: its layout (P3-P7 from res3-res5 and
// LastLevelP6P7, the dense head under Detectron2's names), a focal loss that trains, and
// detections in eval mode. Numerical equality with Detectron2 is test_detectron2_parity.py's.
#include <torch/torch.h>
#include <yaml-cpp/yaml.h>

#include <catch2/catch.hpp>

#include "trainer/model/meta_arch/meta_arch.h"
#include "trainer/model/meta_arch/retinanet.h"
#include "trainer/model/meta_arch/retinanet_head.h"

using namespace mrcnn::model;

namespace {

ModelConfig SmallRetinaNet() {
  const YAML::Node root = YAML::Load(R"(
MODEL:
  META_ARCHITECTURE: RetinaNet
  BACKBONE: {NAME: build_retinanet_resnet_fpn_backbone, FREEZE_AT: 2}
  RESNETS: {DEPTH: 50, OUT_FEATURES: [res3, res4, res5], STEM_OUT_CHANNELS: 32, RES2_OUT_CHANNELS: 64,
            WIDTH_PER_GROUP: 32, NORM: GN}
  FPN: {IN_FEATURES: [res3, res4, res5], OUT_CHANNELS: 16}
  ANCHOR_GENERATOR:
    SIZES: [[32, 40.3174736, 50.7968420], [64, 80.6349472, 101.5936840], [128, 161.2698944, 203.1873680],
            [256, 322.5397888, 406.3747360], [512, 645.0795776, 812.7494720]]
  RETINANET: {NUM_CLASSES: 3}
  PIXEL_MEAN: [103.53, 116.28, 123.675]
  PIXEL_STD: [1.0, 1.0, 1.0]
INPUT: {MIN_SIZE_TEST: 128, MAX_SIZE_TEST: 128, MIN_SIZE_TRAIN: [128], MAX_SIZE_TRAIN: 128, FORMAT: BGR}
)");
  return ModelConfig::FromYaml(root, "retinanet.yaml");
}

}  // namespace

TEST_CASE("a RetinaNet config builds Detectron2's layout", "[retinanet]") {
  const ModelConfig c = SmallRetinaNet();
  CHECK(c.retinanet());
  CHECK_FALSE(c.mask_on);
  CHECK(c.num_classes == 3);
  CHECK(c.FeatureStrides() == std::vector<int64_t>{8, 16, 32, 64, 128});
  // ToYaml round trip keeps the family.
  const ModelConfig again = ModelConfig::FromYaml(YAML::Load(c.ToYaml()), "round trip");
  CHECK(again.retinanet());
  CHECK(again.fpn_top_block == "p6p7");
  CHECK(again.ToYaml() == c.ToYaml());
  auto model = BuildModel(c);
  const auto params = model->named_parameters();
  CHECK(params.contains("backbone.fpn.inner_blocks.1.0.weight"));  // res3's lateral
  CHECK_FALSE(params.contains("backbone.fpn.inner_blocks.0.0.weight"));
  CHECK(params.contains("backbone.fpn.extra_blocks.p6.weight"));
  CHECK(params["backbone.fpn.extra_blocks.p6.weight"].size(1) == 512);  // on res5
  CHECK(params.contains("head.cls_subnet.6.weight"));
  CHECK(params["head.cls_score.weight"].size(0) == 9 * 3);
  CHECK(params["head.cls_score.bias"][0].item<float>() == Approx(-std::log(99.0)));
  CHECK_FALSE(params.contains("rpn.head.conv.0.0.weight"));
  CHECK(std::none_of(params.keys().begin(), params.keys().end(),
                     [](const std::string& k) { return k.starts_with("roi_heads."); }));
}

TEST_CASE("the focal loss is fvcore's", "[retinanet]") {
  const at::Tensor logits = torch::tensor({2.0f, -1.0f, 0.5f});
  const at::Tensor targets = torch::tensor({1.0f, 0.0f, 0.0f});
  const at::Tensor p = logits.sigmoid();
  // alpha 0.25, gamma 2: positives weigh alpha (1-p)^2 * -log p, negatives (1-alpha) p^2 *
  // -log(1-p).
  const double expected =
      0.25 * std::pow(1 - p[0].item<double>(), 2) * -std::log(p[0].item<double>()) +
      0.75 * std::pow(p[1].item<double>(), 2) * -std::log(1 - p[1].item<double>()) +
      0.75 * std::pow(p[2].item<double>(), 2) * -std::log(1 - p[2].item<double>());
  CHECK(SigmoidFocalLossSum(logits, targets, 0.25, 2.0).item<double>() ==
        Approx(expected).epsilon(1e-5));
}

TEST_CASE("RetinaNet trains its losses and detects", "[retinanet]") {
  torch::manual_seed(3);
  auto model = BuildModel(SmallRetinaNet());
  const at::Tensor image = torch::rand({3, 128, 128});
  ImageTarget target;
  target.boxes = torch::tensor({{20.0f, 30.0f, 90.0f, 100.0f}, {5.0f, 5.0f, 40.0f, 30.0f}});
  target.labels = torch::tensor({1, 3}, torch::kLong);
  model->train();
  // The dense head's own parameters (the body is random; GroupNorm keeps its maps sane).
  std::vector<at::Tensor> trainable;
  for (const auto& p : model->named_parameters())
    if (p.key().starts_with("head."))
      trainable.push_back(p.value());
  REQUIRE(trainable.size() == 20);
  torch::optim::SGD sgd(trainable, torch::optim::SGDOptions(0.002).momentum(0.9));
  float first = 0, last = 0;
  for (int step = 0; step < 20; ++step) {
    auto out = model->forward({image}, std::vector<ImageTarget>{target});
    REQUIRE(out.losses.size() == 2);
    const at::Tensor loss = out.losses.at("loss_cls") + out.losses.at("loss_box_reg");
    INFO("step " << step << ": loss_cls " << out.losses.at("loss_cls").item<float>()
                 << ", loss_box_reg " << out.losses.at("loss_box_reg").item<float>());
    REQUIRE(std::isfinite(loss.item<float>()));
    // Divided by Detectron2's moving average of the foreground count (100 at first, then
    // towards this image's count): compare the sums.
    auto& head = dynamic_cast<RetinaNetHead&>(*model->named_children()["head"]);
    const float sum = (loss * head.loss_normalizer()).item<float>();
    if (step == 0) {
      first = sum;
      CHECK(head.loss_normalizer().item<float>() > 90.0f);  // 0.9 * 100 + 0.1 * count
    }
    last = sum;
    sgd.zero_grad();
    loss.backward();
    sgd.step();
  }
  CHECK(last < 0.99f * first);  // 95.1 -> 93.3 when written
  model->eval();
  model->detection_settings().score_thresh = 0.0;
  torch::NoGradGuard no_grad;
  auto detections = TakeInstances(model->forward({torch::rand({3, 96, 160})}));
  REQUIRE(detections.size() == 1);
  const ImageResult& r = detections[0];
  CHECK(r.boxes.size(0) > 0);
  CHECK(r.boxes.size(0) <= 100);
  CHECK(r.labels.min().item<int64_t>() >= 1);
  CHECK(r.labels.max().item<int64_t>() <= 3);
  CHECK(r.scores.max().item<float>() <= 1.0f);
  CHECK_FALSE(r.masks.defined());
  // Detector postprocess: clipped to the original image.
  CHECK(r.boxes.select(1, 2).max().item<float>() <= 160.0f);
  CHECK(r.boxes.select(1, 3).max().item<float>() <= 96.0f);
}
