// Every Detectron2 model-zoo config this project ships builds its model through the registries
// (MODEL.META_ARCHITECTURE, PROPOSAL_GENERATOR.NAME, ROI_HEADS.NAME and the heads' names) and
// predicts: each config as a job reads it (TrainConfig over its _BASE_ chain), the model in
// eval mode on a small image, its outputs those of its family (masks with MODEL.MASK_ON,
// keypoints with MODEL.KEYPOINT_ON). Fresh weights: Detectron2's own numbers on the zoo's
// weights are test_detectron2_parity.py's.
#include <torch/torch.h>
#include <yaml-cpp/yaml.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <map>

#include "trainer/engine/builders.h"
#include "trainer/engine/config/config.h"
#include "trainer/engine/config/model_zoo.h"
#include "trainer/engine/solver/sgd.h"
#include "trainer/model/meta_arch/meta_arch.h"

using namespace mrcnn::engine;
namespace fs = std::filesystem;

TEST_CASE("every shipped model-zoo config builds its model by registry and predicts",
          "[model-zoo]") {
  const fs::path configs = fs::path(MRCNN_SOURCE_DIR) / "configs";
  REQUIRE(SupportedModelZooNames().size() >= 30);
  torch::manual_seed(0);
  torch::NoGradGuard no_grad;
  for (const std::string& name : SupportedModelZooNames()) {
    INFO(name);
    TrainConfig config = TrainConfig::Defaults();
    config.MergeFile(configs / name);
    config.MergeOpts(
        {"MODEL.DEVICE", "cpu", "INPUT.MIN_SIZE_TEST", "64", "INPUT.MAX_SIZE_TEST", "96"});
    const mrcnn::model::ModelConfig mc = BuildModelConfig(config);
    CHECK(mc.meta_architecture == config.GetString("MODEL.META_ARCHITECTURE"));
    // Detectron2's box-loss betas reach the model through the job's config: 0 (L1), 0.5 in the
    // keypoint zoo's box head, Detectron1's 0.1111 (RPN) and 1.0 (box head) in its comparisons.
    const bool detectron1 = name.starts_with("Detectron1-Comparisons/");
    CHECK(mc.rpn_smooth_l1_beta == (detectron1 ? 0.1111 : 0.0));
    CHECK(mc.box_smooth_l1_beta == (detectron1 ? 1.0 : name.starts_with("COCO-Keypoints/") ? 0.5 : 0.0));
    const auto model = mrcnn::model::BuildModel(mc);
    // Random box regressors on a deep random backbone can push every box out of the image;
    // with zero deltas the proposals are the anchors and the detections the proposals, so
    // every config keeps detections and each of its heads runs on them.
    for (const auto& p : model->named_parameters())
      if (p.key().find("bbox_pred") != std::string::npos)
        p.value().zero_();
    model->eval();
    // Random weights score near 1 / classes: keep everything so each head runs.
    model->detection_settings().score_thresh = 0.0;
    const mrcnn::model::ModelOutput out = model->forward({torch::rand({3, 60, 90})});
    REQUIRE(out.images.size() == 1);
    const mrcnn::model::ImageResult& r = out.images[0].instances;
    REQUIRE(r.boxes.dim() == 2);
    CHECK(r.boxes.size(1) == 4);
    CHECK(r.boxes.size(0) > 0);
    CHECK(r.scores.size(0) == r.boxes.size(0));
    CHECK(r.labels.size(0) == r.boxes.size(0));
    CHECK(r.masks.defined() == mc.mask_on);
    if (mc.mask_on) {
      CHECK(r.masks.size(0) == r.boxes.size(0));
      CHECK(r.masks.size(-2) == 60);
      CHECK(r.masks.size(-1) == 90);
    }
    CHECK(r.keypoints.defined() == mc.keypoint_on);
    if (mc.keypoint_on)
      CHECK(r.keypoints.size(1) == mc.num_keypoints);
  }
}

// test/data/detectron2/solver/parameter_groups.json: Detectron2's optimizer parameter groups
// (get_default_optimizer_params through build_optimizer) on three golden models under
// several SOLVER settings (scripts/detectron2_solver_golden.py). Ours must hold the same
// number of trainable parameters in each (lr, weight decay) group. Element counts differ by
// design: our box and mask predictors keep torchvision's background row (the Detectron2
// layout is re-laid out on import), so only parameter counts are compared.
TEST_CASE("the optimizer's parameter groups are Detectron2's", "[model-zoo][optim]") {
  const fs::path golden = fs::path(MRCNN_SOURCE_DIR) / "test/data/detectron2";
  const YAML::Node cases = YAML::LoadFile((golden / "solver/parameter_groups.json").string());
  REQUIRE(cases.size() == 9);
  for (const auto& entry : cases) {
    INFO(entry.first.as<std::string>());
    // The model from the Detectron2 dump (ModelConfig reads it; TrainConfig refuses its keys
    // outside this trainer's, such as VIS_PERIOD), the solver from our defaults, which are
    // Detectron2's (BASE_LR 0.02 as in these configs).
    YAML::Node model_yaml = YAML::LoadFile(
        (golden / entry.second["variant"].as<std::string>() / "config.yaml").string());
    TrainConfig config = TrainConfig::Defaults();
    const YAML::Node opts = entry.second["opts"];
    for (size_t i = 0; i + 1 < opts.size(); i += 2) {
      const std::string key = opts[i].as<std::string>();
      if (key == "MODEL.BACKBONE.FREEZE_AT")
        model_yaml["MODEL"]["BACKBONE"]["FREEZE_AT"] = opts[i + 1];
      else
        config.MergeOpts({key, opts[i + 1].as<std::string>()});
    }
    const auto net =
        mrcnn::model::BuildModel(mrcnn::model::ModelConfig::FromYaml(model_yaml, "golden config"));
    const Sgd sgd(ParametersOf(*net), SgdOptions::FromConfig(config));
    std::map<std::pair<double, double>, int64_t> ours;
    for (const auto& e : sgd.entries())
      ++ours[{config.GetFloat("SOLVER.BASE_LR") * e.lr_factor, e.weight_decay}];
    std::map<std::pair<double, double>, int64_t> theirs;
    for (const auto& group : entry.second["groups"])
      theirs[{group["lr"].as<double>(), group["weight_decay"].as<double>()}] =
          group["parameters"].as<int64_t>();
    for (const auto& [key, count] : theirs) {
      INFO("lr " << key.first << ", weight decay " << key.second);
      CHECK(ours[key] == count);
    }
    CHECK(ours.size() == theirs.size());
  }
}
