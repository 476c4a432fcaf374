// Cascade R-CNN's ROI heads (roi_heads/cascade_roi_heads.cpp): the stages' modules and names,
// the per-stage losses, the config keys' round trip and checks, and inference held to the
// standard class-agnostic head on weights where every stage is the same and refines nothing.
#include <torch/torch.h>
#include <yaml-cpp/yaml.h>

#include <catch2/catch.hpp>

#include "test/trainer/model/small_model_config.h"
#include "trainer/model/meta_arch/generalized_rcnn.h"
#include "trainer/model/roi_heads/cascade_roi_heads.h"

using namespace mrcnn::model;

namespace {

ModelConfig CascadeConfig() {
  ModelConfig c = mrcnn::test::SmallModelConfig();
  c.roi_heads_name = "CascadeROIHeads";
  c.cls_agnostic_bbox_reg = true;
  c.min_size_train = {128};
  c.max_size_train = 128;
  c.min_size_test = 128;
  c.max_size_test = 128;
  return c;
}

ImageTarget OneBox() {
  ImageTarget t;
  t.boxes = torch::tensor({{20.0f, 30.0f, 90.0f, 100.0f}, {60.0f, 10.0f, 120.0f, 50.0f}});
  t.labels = torch::tensor({1, 3}, torch::kLong);
  t.masks = torch::zeros({2, 128, 128}, torch::kByte);
  t.masks.index_put_({0, torch::indexing::Slice(30, 100), torch::indexing::Slice(20, 90)}, 1);
  t.masks.index_put_({1, torch::indexing::Slice(10, 50), torch::indexing::Slice(60, 120)}, 1);
  return t;
}

// The model's ROI heads, which CascadeConfig makes Cascade R-CNN's.
CascadeRoiHeads& CascadeHeads(MetaArchitecture& net) {
  return dynamic_cast<CascadeRoiHeads&>(dynamic_cast<GeneralizedRcnn&>(net).roi_heads());
}

StandardRoiHeads::RoiSamples Samples(const std::vector<at::Tensor>& proposals,
                                     const std::vector<at::Tensor>& labels,
                                     const std::vector<at::Tensor>& matched,
                                     const std::vector<at::Tensor>& valid) {
  StandardRoiHeads::RoiSamples samples;
  samples.proposals = proposals;
  samples.labels = labels;
  samples.matched_boxes = matched;
  samples.valid = valid;
  return samples;
}

}  // namespace

TEST_CASE("cascade config keys round-trip and are checked", "[cascade]") {
  ModelConfig c = CascadeConfig();
  c.cascade_ious = {0.5, 0.65};
  c.cascade_bbox_reg_weights = {{10, 10, 5, 5}, {25, 25, 12.5, 12.5}};
  const ModelConfig back = ModelConfig::FromYaml(YAML::Load(c.ToYaml()), "round trip");
  CHECK(back.cascade());
  CHECK(back.cls_agnostic_bbox_reg);
  CHECK(back.cascade_ious == c.cascade_ious);
  CHECK((back.cascade_bbox_reg_weights == c.cascade_bbox_reg_weights));

  ModelConfig class_specific = CascadeConfig();
  class_specific.cls_agnostic_bbox_reg = false;
  CHECK_THROWS_WITH(class_specific.Validate("x.yaml"),
                    Catch::Contains("MODEL.ROI_BOX_HEAD.CLS_AGNOSTIC_BBOX_REG"));
  ModelConfig uneven = CascadeConfig();
  uneven.cascade_ious = {0.5, 0.6};
  CHECK_THROWS_WITH(uneven.Validate("x.yaml"), Catch::Contains("MODEL.ROI_BOX_CASCADE_HEAD.IOUS"));
  ModelConfig first_iou = CascadeConfig();
  first_iou.cascade_ious = {0.6, 0.6, 0.7};
  CHECK_THROWS_WITH(first_iou.Validate("x.yaml"),
                    Catch::Contains("MODEL.ROI_HEADS.IOU_THRESHOLDS"));
  const YAML::Node bad_weights = YAML::Load(
      "MODEL: {ROI_HEADS: {NAME: CascadeROIHeads}, ROI_BOX_HEAD: {CLS_AGNOSTIC_BBOX_REG: true},"
      " ROI_BOX_CASCADE_HEAD: {BBOX_REG_WEIGHTS: [[10, 10, 5]]}}");
  CHECK_THROWS_WITH(ModelConfig::FromYaml(bad_weights, "w.yaml"), Catch::Contains("four weights"));
}

TEST_CASE("a cascade model has three class-agnostic stages and trains each", "[cascade]") {
  torch::manual_seed(0);
  auto model = BuildModel(CascadeConfig());
  const auto params = model->named_parameters();
  for (const std::string prefix : {"roi_heads.", "roi_heads.cascade.1.", "roi_heads.cascade.2."}) {
    INFO(prefix);
    REQUIRE(params.contains(prefix + "box_head.fc6.weight"));
    REQUIRE(params.contains(prefix + "box_predictor.bbox_pred.weight"));
    CHECK(params[prefix + "box_predictor.bbox_pred.weight"].size(0) == 4);
    CHECK(params[prefix + "box_predictor.cls_score.weight"].size(0) == 4);  // 3 classes + bg
  }
  CHECK_FALSE(params.contains("roi_heads.cascade.3.box_head.fc6.weight"));

  model->train();
  auto out = model->forward({torch::rand({3, 128, 128})}, std::vector<ImageTarget>{OneBox()});
  INFO("losses " << out.losses);
  CHECK_FALSE(out.losses.contains("loss_classifier"));
  CHECK_FALSE(out.losses.contains("loss_box_reg"));
  at::Tensor total = torch::zeros({});
  for (int s = 0; s < 3; ++s) {
    for (const std::string name : {"loss_cls_stage", "loss_box_reg_stage"}) {
      const std::string key = name + std::to_string(s);
      REQUIRE(out.losses.contains(key));
      CHECK(std::isfinite(out.losses[key].item<float>()));
    }
    // 4 classes at random initialisation: cross-entropy near log(4).
    CHECK(out.losses["loss_cls_stage" + std::to_string(s)].item<float>() > 0.5f);
  }
  REQUIRE(out.losses.contains("loss_mask"));
  for (const auto& [name, loss] : out.losses)
    total = total + loss;
  total.backward();
  for (const std::string prefix : {"roi_heads.", "roi_heads.cascade.1.", "roi_heads.cascade.2."}) {
    INFO(prefix);
    const at::Tensor grad = params[prefix + "box_predictor.cls_score.weight"].grad();
    REQUIRE(grad.defined());
    CHECK(grad.abs().sum().item<float>() > 0.0f);
  }
}

TEST_CASE("cascade inference with equal, non-refining stages is the standard agnostic head's",
          "[cascade]") {
  torch::manual_seed(1);
  auto cascade = BuildModel(CascadeConfig());
  ModelConfig standard_config = CascadeConfig();
  standard_config.roi_heads_name = "StandardROIHeads";
  auto standard = BuildModel(standard_config);
  {
    torch::NoGradGuard no_grad;
    auto cascade_params = cascade->named_parameters();
    // Every stage refines nothing (zero deltas) and scores as stage 0: the mean of three
    // equal scores and the last stage's boxes are then stage 0's scores and the proposals.
    for (const auto& p : cascade_params) {
      const std::string& name = p.key();
      if (name.find("bbox_pred") != std::string::npos)
        p.value().zero_();
    }
    for (const std::string stage : {"roi_heads.cascade.1.", "roi_heads.cascade.2."}) {
      for (const std::string part :
           {"box_head.fc6.weight", "box_head.fc6.bias", "box_head.fc7.weight", "box_head.fc7.bias",
            "box_predictor.cls_score.weight", "box_predictor.cls_score.bias"}) {
        cascade_params[stage + part].copy_(cascade_params["roi_heads." + part]);
      }
    }
    for (const auto& p : standard->named_parameters())
      p.value().copy_(cascade_params[p.key()]);
    for (const auto& b : standard->named_buffers())
      b.value().copy_(cascade->named_buffers()[b.key()]);
  }
  cascade->eval();
  standard->eval();
  for (auto* net : {&cascade, &standard})
    (*net)->detection_settings().score_thresh = 0.2;  // random heads score near 1/4
  torch::NoGradGuard no_grad;
  const at::Tensor image = torch::rand({3, 96, 160});
  const auto ours = TakeInstances(cascade->forward({image}));
  const auto reference = TakeInstances(standard->forward({image}));
  REQUIRE(ours.size() == 1);
  REQUIRE(reference[0].boxes.size(0) > 0);
  REQUIRE(ours[0].boxes.sizes() == reference[0].boxes.sizes());
  CHECK(torch::allclose(ours[0].boxes, reference[0].boxes, 1e-4, 1e-3));
  CHECK(torch::allclose(ours[0].scores, reference[0].scores, 1e-5, 1e-6));
  CHECK(ours[0].labels.equal(reference[0].labels));
  CHECK(ours[0].masks.sizes() == reference[0].masks.sizes());
}

TEST_CASE("each cascade stage sends 1 / stages of its gradient into the pooled features",
          "[cascade]") {
  // Stage 0's loss on the same samples and weights, in a three-stage and a one-stage cascade:
  // the forward values agree and the gradient into the pooled features is a third.
  torch::manual_seed(2);
  auto three = BuildModel(CascadeConfig());
  ModelConfig single_config = CascadeConfig();
  single_config.cascade_ious = {0.5};
  single_config.cascade_bbox_reg_weights = {{10, 10, 5, 5}};
  auto single = BuildModel(single_config);
  {
    torch::NoGradGuard no_grad;
    auto from = three->named_parameters();
    for (const auto& p : single->named_parameters())
      p.value().copy_(from[p.key()]);
  }
  three->train();
  single->train();
  const std::vector<at::Tensor> proposals = {torch::tensor({{10.0f, 20.0f, 80.0f, 90.0f},
                                                            {22.0f, 28.0f, 88.0f, 104.0f},
                                                            {0.0f, 0.0f, 40.0f, 40.0f},
                                                            {60.0f, 12.0f, 118.0f, 52.0f}})};
  const std::vector<at::Tensor> labels = {torch::tensor({1, 1, 0, 3}, torch::kLong)};
  const ImageTarget target = OneBox();
  const std::vector<at::Tensor> matched = {
      target.boxes.index_select(0, torch::tensor({0, 0, 0, 1}, torch::kLong))};
  const std::vector<at::Tensor> valid = {torch::tensor({true, true, true, true})};
  const StandardRoiHeads::RoiSamples samples = Samples(proposals, labels, matched, valid);
  const at::Tensor features = torch::randn({4, 32, 7, 7});
  auto stage0_gradient = [&](std::shared_ptr<MetaArchitecture>& net) {
    std::vector<at::Tensor> pooled;
    const StandardRoiHeads::BoxPooler pool = [&](const std::vector<at::Tensor>& boxes) {
      REQUIRE(boxes.size() == 1);
      REQUIRE(boxes[0].size(0) == 4);  // every stage scores every sampled row
      pooled.push_back(features.clone().requires_grad_(true));
      return pooled.back();
    };
    auto losses = CascadeHeads(*net).BoxLosses(pool, samples, {target}, {{128, 128}});
    const at::Tensor loss = losses["loss_cls_stage0"] + losses["loss_box_reg_stage0"];
    loss.backward();
    return std::make_pair(loss.detach(), pooled.front().grad());
  };
  const auto [loss3, grad3] = stage0_gradient(three);
  const auto [loss1, grad1] = stage0_gradient(single);
  CHECK(loss3.item<float>() == loss1.item<float>());
  REQUIRE(grad1.abs().sum().item<float>() > 0.0f);
  CHECK(torch::allclose(grad3 * 3.0, grad1, 1e-5, 1e-7));
}

TEST_CASE("later cascade stages re-match every box at their IoU and drop the empty ones",
          "[cascade]") {
  // Every predictor regresses nothing (zero deltas: each stage's boxes are its proposals,
  // clipped) and scores background at logit 1, the classes at 0. The ground truth is one box;
  // the proposals: one at IoU 55/85 = 0.647 (foreground at 0.5 and 0.6, background at 0.7),
  // one far from it, and one outside the 128 x 128 image (empty once clipped: stages 1 and 2
  // leave it out).
  torch::manual_seed(3);
  auto net = BuildModel(CascadeConfig());
  {
    torch::NoGradGuard no_grad;
    for (const auto& p : net->named_parameters()) {
      const std::string& name = p.key();
      if (name.find("bbox_pred") != std::string::npos ||
          name.find("cls_score.weight") != std::string::npos)
        p.value().zero_();
      if (name.find("cls_score.bias") != std::string::npos)
        p.value().copy_(torch::tensor({1.0f, 0.0f, 0.0f, 0.0f}));
    }
  }
  net->train();
  ImageTarget target;
  target.boxes = torch::tensor({{20.0f, 30.0f, 90.0f, 100.0f}});
  target.labels = torch::tensor({2}, torch::kLong);
  const std::vector<at::Tensor> proposals = {torch::tensor({{35.0f, 30.0f, 105.0f, 100.0f},
                                                            {0.0f, 0.0f, 30.0f, 30.0f},
                                                            {130.0f, 10.0f, 150.0f, 40.0f}})};
  const std::vector<at::Tensor> labels = {torch::tensor({2, 0, 0}, torch::kLong)};
  const std::vector<at::Tensor> matched = {target.boxes.expand({3, 4}).contiguous()};
  const std::vector<at::Tensor> valid = {torch::tensor({true, true, true})};
  const StandardRoiHeads::BoxPooler pool = [](const std::vector<at::Tensor>& boxes) {
    return torch::randn({boxes[0].size(0), 32, 7, 7});
  };
  auto losses = CascadeHeads(*net).BoxLosses(pool, Samples(proposals, labels, matched, valid),
                                             {target}, {{128, 128}});
  const double foreground = std::log(std::exp(1.0) + 3.0);  // -log softmax of a class
  const double background = foreground - 1.0;
  CHECK(losses["loss_cls_stage0"].item<double>() ==
        Approx((foreground + 2 * background) / 3).epsilon(1e-5));
  CHECK(losses["loss_cls_stage1"].item<double>() ==
        Approx((foreground + background) / 2).epsilon(1e-5));
  CHECK(losses["loss_cls_stage2"].item<double>() == Approx(background).epsilon(1e-5));
  // The positive's target: dx = wx * (55 - 70) / 70, the rest 0; smooth L1 with beta 1/9.
  auto smooth_l1 = [](double x) { return std::abs(x) - 0.5 / 9.0; };
  CHECK(losses["loss_box_reg_stage0"].item<double>() ==
        Approx(smooth_l1(10.0 * 15.0 / 70.0) / 3).epsilon(1e-5));
  CHECK(losses["loss_box_reg_stage1"].item<double>() ==
        Approx(smooth_l1(20.0 * 15.0 / 70.0) / 2).epsilon(1e-5));
  CHECK(losses["loss_box_reg_stage2"].item<double>() == 0.0);
}

TEST_CASE("cascade heads take images without ground truth and without proposals", "[cascade]") {
  torch::manual_seed(4);
  auto net = BuildModel(CascadeConfig());
  net->train();
  ImageTarget empty;
  empty.boxes = torch::zeros({0, 4});
  empty.labels = torch::zeros({0}, torch::kLong);
  empty.masks = torch::zeros({0, 128, 128}, torch::kByte);
  auto out = net->forward({torch::rand({3, 128, 128}), torch::rand({3, 128, 128})},
                          std::vector<ImageTarget>{empty, OneBox()});
  for (const auto& [name, loss] : out.losses) {
    INFO(name);
    CHECK(std::isfinite(loss.item<float>()));
  }
  CHECK(out.losses.contains("loss_box_reg_stage2"));

  net->eval();
  torch::NoGradGuard no_grad;
  const StandardRoiHeads::BoxPooler pool = [](const std::vector<at::Tensor>& boxes) {
    int64_t rows = 0;
    for (const auto& b : boxes)
      rows += b.size(0);
    return torch::zeros({rows, 32, 7, 7});
  };
  const auto detections = CascadeHeads(*net).BoxDetections(
      pool, {torch::zeros({0, 4}), torch::tensor({{10.0f, 10.0f, 50.0f, 60.0f}})},
      {{128, 128}, {128, 128}});
  REQUIRE(detections.size() == 2);
  CHECK(detections[0].boxes.size(0) == 0);
  CHECK(detections[0].boxes.size(1) == 4);
}

TEST_CASE("a standard head with class-agnostic regression trains as one whose classes share a box",
          "[cascade]") {
  // MODEL.ROI_BOX_HEAD.CLS_AGNOSTIC_BBOX_REG on StandardROIHeads: the one box per RoI is what a
  // class-specific predictor gives when every class's rows are that box's.
  ModelConfig agnostic_config = CascadeConfig();
  agnostic_config.roi_heads_name = "StandardROIHeads";
  ModelConfig specific_config = agnostic_config;
  specific_config.cls_agnostic_bbox_reg = false;
  torch::manual_seed(5);
  auto agnostic = BuildModel(agnostic_config);
  auto specific = BuildModel(specific_config);
  {
    torch::NoGradGuard no_grad;
    auto from = agnostic->named_parameters();
    for (const auto& p : specific->named_parameters()) {
      const at::Tensor& source = from[p.key()];
      std::vector<int64_t> repeats(static_cast<size_t>(source.dim()), 1);
      repeats[0] = p.value().size(0) / source.size(0);  // 4 classes' rows of the one box
      p.value().copy_(source.repeat(repeats));
    }
  }
  const at::Tensor image = torch::rand({3, 128, 128});
  std::map<std::string, at::Tensor> losses[2];
  int i = 0;
  for (std::shared_ptr<MetaArchitecture>* net : {&agnostic, &specific}) {
    (*net)->train();
    torch::manual_seed(6);  // the same samples for both
    losses[i++] = (*net)->forward({image}, std::vector<ImageTarget>{OneBox()}).losses;
  }
  CHECK(agnostic->named_parameters()["roi_heads.box_predictor.bbox_pred.weight"].size(0) == 4);
  CHECK(specific->named_parameters()["roi_heads.box_predictor.bbox_pred.weight"].size(0) == 16);
  for (const char* name : {"loss_classifier", "loss_box_reg"}) {
    INFO(name);
    CHECK(losses[0][name].item<float>() == Approx(losses[1][name].item<float>()).epsilon(1e-5));
  }
  CHECK(losses[0]["loss_box_reg"].item<float>() > 0.0f);
}
