// Unit tests of trainer/model: registry, config, input transform, safetensors.
#include <torch/torch.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <future>

#include "test/trainer/model/small_model_config.h"
#include "test/trainer/remove_tree.h"
#include "trainer/model/config.h"
#include "trainer/model/inference/inference.h"
#include "trainer/model/inference/mask_bits.h"
#include "trainer/model/meta_arch/generalized_rcnn.h"
#include "trainer/model/meta_arch/meta_arch.h"
#include "trainer/model/parts.h"
#include "trainer/model/registry.h"
#include "trainer/model/roi_heads/roi_heads.h"
#include "trainer/model/safetensors.h"

using namespace mrcnn::model;

namespace {

// The test process's own folder under the temp dir, removed with its files when the process
// exits (each of these tests wrote up to 44 MB there, and every run left its folder behind).
class ProcessTempDir {
 public:
  ProcessTempDir()
      : path_(std::filesystem::temp_directory_path() /
              ("mrcnn_test_model_" + std::to_string(::getpid()))) {
    std::filesystem::create_directories(path_);
  }
  ~ProcessTempDir() { mrcnn::test::RemoveTree(path_); }
  ProcessTempDir(const ProcessTempDir&) = delete;
  ProcessTempDir& operator=(const ProcessTempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

std::filesystem::path TempPath(const std::string& name) {
  static const ProcessTempDir dir;
  return dir.path() / name;
}

void WriteBytes(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string Header(const std::string& json, const std::string& data) {
  std::string out(8, '\0');
  uint64_t n = json.size();
  for (int i = 0; i < 8; ++i)
    out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + json + data;
}

ModelConfig SmallConfig() {
  return mrcnn::test::SmallModelConfig();
}

}  // namespace

TEST_CASE("registry lists the built-in parts and rejects unknown names", "[registry]") {
  CHECK(BackboneRegistry().Contains("resnet18"));
  CHECK(BackboneRegistry().Contains("resnet50"));
  CHECK(BackboneRegistry().Contains("resnet101"));
  CHECK(NeckRegistry().Contains("fpn"));
  CHECK(RpnHeadRegistry().Contains("standard"));
  CHECK(BoxHeadRegistry().Contains("two_mlp"));
  CHECK(MaskHeadRegistry().Contains("four_conv"));
  ModelConfig c = SmallConfig();
  c.backbone = "resnet7";
  try {
    auto model = BuildModel(c);
    FAIL("unknown backbone accepted");
  } catch (const std::runtime_error& e) {
    const std::string msg = e.what();
    CHECK(msg.find("MODEL.BACKBONE.NAME") != std::string::npos);
    CHECK(msg.find("resnet7") != std::string::npos);
    CHECK(msg.find("resnet50") != std::string::npos);
  }
  CHECK_THROWS_AS(BoxHeadRegistry().Add("two_mlp", nullptr), std::logic_error);
}

TEST_CASE("meta-architecture, proposal generator and ROI heads are looked up by their config keys",
          "[registry]") {
  CHECK(MetaArchRegistry().Names() == std::vector<std::string>{"GeneralizedRCNN", "RetinaNet"});
  CHECK(ProposalGeneratorRegistry().Names() == std::vector<std::string>{"RPN"});
  CHECK(RoiHeadsRegistry().Names() ==
        std::vector<std::string>{"CascadeROIHeads", "Res5ROIHeads", "StandardROIHeads"});
  CHECK(KeypointHeadRegistry().Contains("KRCNNConvDeconvUpsampleHead"));
  struct Unknown {
    const char* key;
    void (*set)(ModelConfig&);
    const char* registered;
  };
  const Unknown cases[] = {
      {"MODEL.META_ARCHITECTURE", [](ModelConfig& c) { c.meta_architecture = "Nope"; },
       "GeneralizedRCNN, RetinaNet"},
      {"MODEL.PROPOSAL_GENERATOR.NAME", [](ModelConfig& c) { c.proposal_generator = "Nope"; },
       "RPN"},
      {"MODEL.ROI_HEADS.NAME", [](ModelConfig& c) { c.roi_heads_name = "Nope"; },
       "CascadeROIHeads, Res5ROIHeads, StandardROIHeads"},
      {"MODEL.ROI_KEYPOINT_HEAD.NAME",
       [](ModelConfig& c) {
         c.keypoint_on = true;
         c.keypoint_head = "Nope";
       },
       "KRCNNConvDeconvUpsampleHead"},
  };
  for (const Unknown& u : cases) {
    INFO(u.key);
    ModelConfig c = SmallConfig();
    u.set(c);
    // At config time: Validate, which FromYaml and every model build run first.
    try {
      c.Validate("job.yaml");
      FAIL("an unknown name passed Validate");
    } catch (const std::runtime_error& e) {
      const std::string msg = e.what();
      CHECK(msg.find("job.yaml") != std::string::npos);
      CHECK(msg.find(u.key) != std::string::npos);
      CHECK(msg.find("'Nope'") != std::string::npos);
      CHECK(msg.find(std::string("(registered: ") + u.registered + ")") != std::string::npos);
    }
    CHECK_THROWS_WITH(BuildModel(c), Catch::Contains(u.key));
  }
  // The YAML keys reach the same fields.
  const ModelConfig read = ModelConfig::FromYaml(
      YAML::Load("MODEL: {PROPOSAL_GENERATOR: {NAME: RPN}, ROI_HEADS: {NAME: StandardROIHeads}}"),
      "names.yaml");
  CHECK(read.proposal_generator == "RPN");
  CHECK_THROWS_WITH(
      ModelConfig::FromYaml(YAML::Load("MODEL: {PROPOSAL_GENERATOR: {NAME: PrecomputedProposals}}"),
                            "fast_rcnn.yaml")
          .Validate("fast_rcnn.yaml"),
      Catch::Contains("MODEL.PROPOSAL_GENERATOR.NAME"));
}

namespace {
class ConstantBoxHead : public BoxHead {
 public:
  explicit ConstantBoxHead(int64_t in) { fc_ = register_module("fc", torch::nn::Linear(in, 8)); }
  at::Tensor Forward(const at::Tensor& pooled) override {
    return torch::relu(fc_->forward(pooled.flatten(1)));
  }
  int64_t RepresentationSize() const override { return 8; }

 private:
  torch::nn::Linear fc_{nullptr};
};
}  // namespace

TEST_CASE("a registered part is chosen by name from the config", "[registry]") {
  if (!BoxHeadRegistry().Contains("test_one_fc")) {
    BoxHeadRegistry().Add("test_one_fc", [](const ModelConfig& c) {
      return std::make_shared<ConstantBoxHead>(c.fpn_out_channels * c.box_pooler_resolution *
                                               c.box_pooler_resolution);
    });
  }
  ModelConfig c = SmallConfig();
  c.box_head = "test_one_fc";
  auto model = BuildModel(c);
  TensorMap state = StateDict(*model);
  CHECK(state.count("roi_heads.box_head.fc.weight") == 1);
  CHECK(state.count("roi_heads.box_head.fc6.weight") == 0);
  CHECK(state.at("roi_heads.box_predictor.cls_score.weight").sizes() == at::IntArrayRef({4, 8}));
}

TEST_CASE("state_dict names follow torchvision", "[registry]") {
  ModelConfig c;
  c.num_classes = 4;
  auto model = BuildModel(c);
  TensorMap state = StateDict(*model);
  for (const char* key :
       {"backbone.body.conv1.weight", "backbone.body.bn1.running_var",
        "backbone.body.layer1.0.downsample.0.weight", "backbone.body.layer1.0.downsample.1.weight",
        "backbone.body.layer4.2.bn3.bias", "backbone.fpn.inner_blocks.0.0.weight",
        "backbone.fpn.layer_blocks.3.0.bias", "rpn.head.conv.0.0.weight",
        "rpn.head.cls_logits.weight", "rpn.head.bbox_pred.bias", "roi_heads.box_head.fc6.weight",
        "roi_heads.box_head.fc7.bias", "roi_heads.box_predictor.cls_score.weight",
        "roi_heads.box_predictor.bbox_pred.weight", "roi_heads.mask_head.0.0.weight",
        "roi_heads.mask_head.3.0.bias", "roi_heads.mask_predictor.conv5_mask.weight",
        "roi_heads.mask_predictor.mask_fcn_logits.weight"}) {
    INFO(key);
    CHECK(state.count(key) == 1);
  }
  CHECK(state.at("roi_heads.box_head.fc6.weight").sizes() == at::IntArrayRef({1024, 12544}));
  CHECK(state.at("roi_heads.mask_predictor.mask_fcn_logits.weight").size(0) == 5);
  // len(maskrcnn_resnet50_fpn(num_classes=5).state_dict()) without num_batches_tracked.
  CHECK(state.size() == 307);
  // trainable_layers = 3 freezes conv1 and layer1 like torchvision.
  for (const auto& p : model->named_parameters()) {
    const bool frozen = p.key().rfind("backbone.body.conv1", 0) == 0 ||
                        p.key().rfind("backbone.body.layer1", 0) == 0;
    INFO(p.key());
    CHECK(p.value().requires_grad() == !frozen);
  }
}

TEST_CASE("config reads Detectron2-style keys and round-trips through ToYaml", "[config]") {
  YAML::Node root = YAML::Load(
      "MODEL: {ROI_HEADS: {NUM_CLASSES: 7, SCORE_THRESH_TEST: 0.3}, RPN: {IOU_THRESHOLDS: [0.2, "
      "0.8]},"
      " BACKBONE: {NAME: resnet101}}\nINPUT: {MIN_SIZE_TEST: 600, MIN_SIZE_TRAIN: 640}\nSOLVER: "
      "{BASE_LR: 0.02}\n");
  ModelConfig c = ModelConfig::FromYaml(root, "test.yaml");
  CHECK(c.num_classes == 7);
  CHECK(c.box_score_thresh == Approx(0.3));
  CHECK(c.rpn_bg_iou_thresh == Approx(0.2));
  CHECK(c.rpn_fg_iou_thresh == Approx(0.8));
  CHECK(c.backbone == "resnet101");
  CHECK(c.min_size_test == 600);
  CHECK(c.min_size_train == std::vector<int>{640});
  CHECK(c.max_size_test == 1333);
  ModelConfig again = ModelConfig::FromYaml(YAML::Load(c.ToYaml()), "round trip");
  CHECK(again.ToYaml() == c.ToYaml());
  CHECK_THROWS_WITH(
      ModelConfig::FromYaml(YAML::Load("MODEL: {ROI_HEADS: {NUM_CLASSES: abc}}"), "bad.yaml"),
      Catch::Contains("bad.yaml") && Catch::Contains("MODEL.ROI_HEADS.NUM_CLASSES"));
  CHECK_THROWS_WITH(
      ModelConfig::FromYaml(YAML::Load("MODEL: {ROI_HEADS: {NUM_CLASSES: 0}}"), "zero.yaml"),
      Catch::Contains("NUM_CLASSES"));
}

namespace {

// A narrow Detectron2-convention config (the zoo's layout, small widths) from YAML text:
// `extra`'s keys, and narrow widths and 3 classes where it does not set them.
ModelConfig Detectron2Config(const std::string& extra) {
  YAML::Node root = YAML::Load("MODEL:\n" + extra);
  YAML::Node model = root["MODEL"];
  auto narrow = [&](const char* group, const char* key, int value) {
    if (!model[group] || !model[group][key])
      model[group][key] = value;
  };
  narrow("RESNETS", "STEM_OUT_CHANNELS", 8);
  narrow("RESNETS", "RES2_OUT_CHANNELS", 32);
  narrow("RESNETS", "WIDTH_PER_GROUP", 8);
  narrow("FPN", "OUT_CHANNELS", 16);
  narrow("ROI_HEADS", "NUM_CLASSES", 3);
  narrow("ROI_BOX_HEAD", "FC_DIM", 32);
  narrow("ROI_MASK_HEAD", "CONV_DIM", 8);
  return ModelConfig::FromYaml(root, "d2.yaml");
}

}  // namespace

TEST_CASE("Detectron2's backbone names select its convention, read from its keys",
          "[config][detectron2]") {
  const ModelConfig fpn = Detectron2Config(
      "  BACKBONE: {NAME: build_resnet_fpn_backbone}\n"
      "  ROI_BOX_HEAD: {NAME: FastRCNNConvFCHead, NUM_FC: 2, POOLER_TYPE: ROIAlignV2}\n"
      "  ROI_MASK_HEAD: {NAME: MaskRCNNConvUpsampleHead, NUM_CONV: 4, POOLER_TYPE: ROIAlign}\n"
      "  RPN: {HEAD_NAME: StandardRPNHead}\n"
      "  PROPOSAL_GENERATOR: {MIN_SIZE: 0.0}\n"
      "  BACKBONE_EXTRA_KEY_DETECTRON2_HAS: 1\n"
      "INPUT: {FORMAT: BGR}\n");
  CHECK(fpn.detectron2());
  CHECK(fpn.backbone == "detectron2_resnet");
  CHECK(fpn.neck == "fpn");
  CHECK(fpn.box_head == "two_mlp");
  CHECK(fpn.mask_head == "four_conv");
  CHECK(fpn.rpn_head == "standard");
  CHECK(fpn.box_pooler_aligned);
  CHECK_FALSE(fpn.mask_pooler_aligned);
  CHECK(fpn.input_format == "BGR");
  CHECK(fpn.rpn_min_size == 0.0);
  CHECK(fpn.resnet_stride_in_1x1);
  CHECK(fpn.FeatureStrides() == std::vector<int64_t>{4, 8, 16, 32, 64});
  ModelConfig again = ModelConfig::FromYaml(YAML::Load(fpn.ToYaml()), "round trip");
  CHECK(again.ToYaml() == fpn.ToYaml());
  CHECK(again.detectron2());

  const ModelConfig c4 = Detectron2Config(
      "  BACKBONE: {NAME: build_resnet_backbone}\n"
      "  RESNETS: {OUT_FEATURES: [res4], STEM_OUT_CHANNELS: 8, RES2_OUT_CHANNELS: 32, "
      "WIDTH_PER_GROUP: 8}\n"
      "  ROI_HEADS: {NAME: Res5ROIHeads, NUM_CLASSES: 3}\n"
      "  ROI_BOX_HEAD: {NAME: \"\", POOLER_RESOLUTION: 14}\n");
  CHECK(c4.neck == "none");
  CHECK(c4.box_head == "res5");
  CHECK(c4.FeatureStrides() == std::vector<int64_t>{16});
  CHECK(c4.FeatureChannels() == 128);
  CHECK(c4.MaskResolution() == 14);
  CHECK(ModelConfig::FromYaml(YAML::Load(c4.ToYaml()), "round trip").ToYaml() == c4.ToYaml());

  const ModelConfig conv_fc =
      Detectron2Config("  BACKBONE: {NAME: build_resnet_fpn_backbone}\n"
                       "  ROI_BOX_HEAD: {NAME: FastRCNNConvFCHead, NUM_CONV: 4, NUM_FC: 1}\n");
  CHECK(conv_fc.box_head == "conv_fc");
  CHECK(ModelConfig::FromYaml(YAML::Load(conv_fc.ToYaml()), "round trip").ToYaml() == conv_fc.ToYaml());
  CHECK_THROWS_WITH(
      Detectron2Config("  BACKBONE: {NAME: build_resnet_fpn_backbone}\n"
                       "  ROI_BOX_HEAD: {NAME: FastRCNNConvFCHead, NUM_CONV: 0, NUM_FC: 0}\n"),
      Catch::Contains("d2.yaml") && Catch::Contains("NUM_FC"));
  CHECK_THROWS_WITH(Detectron2Config("  BACKBONE: {NAME: build_resnet_fpn_backbone}\n"
                                     "  ROI_BOX_HEAD: {POOLER_TYPE: ROIPool}\n"),
                    Catch::Contains("POOLER_TYPE") && Catch::Contains("ROIPool"));
  CHECK_THROWS_WITH(Detectron2Config("  BACKBONE: {NAME: build_resnet_backbone}\n"
                                     "  RESNETS: {OUT_FEATURES: [res4, res5]}\n"),
                    Catch::Contains("OUT_FEATURES") && Catch::Contains("one stage"));
  CHECK_THROWS_WITH(Detectron2Config("  BACKBONE: {NAME: build_resnet_backbone}\n"
                                     "  RESNETS: {OUT_FEATURES: [res5]}\n"
                                     "  ROI_HEADS: {NAME: Res5ROIHeads}\n"),
                    Catch::Contains("Res5ROIHeads") && Catch::Contains("res4"));
  CHECK_THROWS_WITH(
      Detectron2Config("  BACKBONE: {NAME: build_resnet_fpn_backbone}\n  RESNETS: {DEPTH: 34}\n"),
      Catch::Contains("MODEL.RESNETS.DEPTH"));
}

TEST_CASE("Detectron2's R-CNN families build with its stages under our names",
          "[registry][detectron2]") {
  struct Family {
    std::string yaml;
    std::vector<std::string> present, absent;
    int64_t tensors;
  };
  const std::vector<Family> families = {
      {"  BACKBONE: {NAME: build_resnet_fpn_backbone}\n",
       {"backbone.body.layer4.2.conv3.weight", "backbone.fpn.inner_blocks.3.0.weight",
        "roi_heads.box_head.fc6.weight", "roi_heads.mask_head.3.0.weight"},
       {"roi_heads.box_head.layer4.0.conv1.weight"},
       307},
      {"  BACKBONE: {NAME: build_resnet_backbone}\n"
       "  RESNETS: {OUT_FEATURES: [res4], STEM_OUT_CHANNELS: 8, RES2_OUT_CHANNELS: 32, "
       "WIDTH_PER_GROUP: 8}\n"
       "  ANCHOR_GENERATOR: {SIZES: [[32, 64, 128, 256, 512]]}\n"
       "  ROI_HEADS: {NAME: Res5ROIHeads, NUM_CLASSES: 3}\n"
       "  ROI_BOX_HEAD: {POOLER_RESOLUTION: 14}\n",
       {"backbone.body.layer3.5.conv3.weight", "roi_heads.box_head.layer4.2.bn3.running_var",
        "roi_heads.box_head.layer4.0.downsample.0.weight",
        "roi_heads.mask_predictor.conv5_mask.weight"},
       {"backbone.body.layer4.0.conv1.weight", "backbone.fpn.inner_blocks.0.0.weight",
        "roi_heads.mask_head.0.0.weight"},
       0},
      {"  BACKBONE: {NAME: build_resnet_backbone}\n"
       "  RESNETS: {OUT_FEATURES: [res5], RES5_DILATION: 2, STEM_OUT_CHANNELS: 8, "
       "RES2_OUT_CHANNELS: 32,"
       " WIDTH_PER_GROUP: 8}\n"
       "  ANCHOR_GENERATOR: {SIZES: [[32, 64, 128, 256, 512]]}\n",
       {"backbone.body.layer4.2.conv2.weight", "roi_heads.box_head.fc6.weight",
        "roi_heads.mask_head.0.0.weight"},
       {"backbone.fpn.inner_blocks.0.0.weight"},
       0},
  };
  torch::manual_seed(3);
  for (const Family& f : families) {
    INFO(f.yaml);
    const ModelConfig c = Detectron2Config(f.yaml);
    auto model = BuildModel(c);
    const TensorMap state = StateDict(*model);
    for (const auto& key : f.present) {
      INFO(key);
      CHECK(state.count(key) == 1);
    }
    for (const auto& key : f.absent) {
      INFO(key);
      CHECK(state.count(key) == 0);
    }
    if (f.tensors > 0)
      CHECK(static_cast<int64_t>(state.size()) == f.tensors);
    model->eval();
    torch::NoGradGuard no_grad;
    const ModelOutput out = model->forward({torch::rand({3, 96, 128})});
    REQUIRE(out.images.size() == 1);
    CHECK(out.images[0].instances.boxes.size(1) == 4);
    // No proposal at all (a random RPN can keep none) gives no detections, not an error.
    model->detection_settings().score_thresh = 1.0;
    std::vector<at::Tensor> none = {torch::empty({0, 4})};
    std::vector<ImageResult> empty;
    auto& rcnn = dynamic_cast<GeneralizedRcnn&>(*model);
    rcnn.roi_heads().Forward(rcnn.PooledLevels(rcnn.Features(torch::rand({1, 3, 96, 128}))), none,
                             {{96, 128}}, nullptr, &empty);
    REQUIRE(empty.size() == 1);
    CHECK(empty[0].boxes.size(0) == 0);
  }
  // GN everywhere Detectron2's GN config puts it, a 4conv1fc box head, class-agnostic heads:
  // Detectron2's names (a conv's norm inside it), no bias under a norm.
  const ModelConfig gn = Detectron2Config(
      "  BACKBONE: {NAME: build_resnet_fpn_backbone}\n"
      "  RESNETS: {NORM: GN, STEM_OUT_CHANNELS: 32, RES2_OUT_CHANNELS: 32, NUM_GROUPS: 32,"
      " WIDTH_PER_GROUP: 1, STRIDE_IN_1X1: false}\n"
      "  FPN: {NORM: GN, OUT_CHANNELS: 32}\n"
      "  ROI_BOX_HEAD: {NAME: FastRCNNConvFCHead, NUM_CONV: 4, NUM_FC: 1, NORM: GN, CONV_DIM: 32,"
      " FC_DIM: 64, CLS_AGNOSTIC_BBOX_REG: true}\n"
      "  ROI_MASK_HEAD: {NORM: GN, CONV_DIM: 32, NUM_CONV: 2, CLS_AGNOSTIC_MASK: true}\n");
  CHECK(gn.box_head == "conv_fc");
  auto gn_model = BuildModel(gn);
  const TensorMap g = StateDict(*gn_model);
  for (const char* key :
       {"backbone.body.bn1.weight", "backbone.body.layer1.0.bn2.bias",
        "backbone.fpn.inner_blocks.0.0.norm.weight", "backbone.fpn.layer_blocks.3.0.norm.bias",
        "roi_heads.box_head.conv4.norm.weight", "roi_heads.box_head.fc6.weight",
        "roi_heads.mask_head.1.0.norm.weight"}) {
    INFO(key);
    CHECK(g.count(key) == 1);
  }
  for (const char* key : {"backbone.fpn.inner_blocks.0.0.bias", "roi_heads.box_head.conv1.bias",
                          "roi_heads.box_head.fc7.weight", "roi_heads.mask_head.0.0.bias",
                          "roi_heads.mask_head.2.0.weight"}) {
    INFO(key);
    CHECK(g.count(key) == 0);
  }
  CHECK(g.at("roi_heads.box_head.fc6.weight").sizes() == at::IntArrayRef({64, 32 * 7 * 7}));
  CHECK(g.at("roi_heads.box_predictor.bbox_pred.weight").size(0) == 4);
  CHECK(g.at("roi_heads.mask_predictor.mask_fcn_logits.weight").size(0) == 1);
  // Deformable 3x3s in res3-res5 (v1; v2's offset conv also gives the mask: 27 channels).
  for (bool modulated : {false, true}) {
    ModelConfig dconv = Detectron2Config(
        "  BACKBONE: {NAME: build_resnet_fpn_backbone}\n"
        "  RESNETS: {DEFORM_ON_PER_STAGE: [false, true, true, true]}\n");
    dconv.resnet_deform_modulated = modulated;
    auto dconv_model = BuildModel(dconv);
    const TensorMap d = StateDict(*dconv_model);
    CHECK(d.count("backbone.body.layer1.0.conv2_offset.weight") == 0);
    CHECK(d.at("backbone.body.layer2.3.conv2_offset.weight").size(0) == (modulated ? 27 : 18));
    CHECK(d.at("backbone.body.layer4.2.conv2_offset.bias").abs().sum().item<double>() == 0.0);
    // Zero offsets (the initialisation) are a plain 3x3: the deformable model equals the plain
    // one with the same weights (v2's mask is sigmoid(0) = 0.5 there, so v1 only).
    if (!modulated) {
      ModelConfig plain_config = dconv;
      plain_config.resnet_deform_on_per_stage = {false, false, false, false};
      auto plain_model = BuildModel(plain_config);
      torch::NoGradGuard no_grad;
      for (auto& [name, tensor] : StateDict(*plain_model))
        tensor.copy_(d.at(name));
      dconv_model->eval();
      plain_model->eval();
      const at::Tensor image = torch::rand({1, 3, 64, 96});
      auto& deformable = dynamic_cast<GeneralizedRcnn&>(*dconv_model);
      auto& reference = dynamic_cast<GeneralizedRcnn&>(*plain_model);
      const auto a = deformable.Features(image), b = reference.Features(image);
      REQUIRE(a.size() == b.size());
      for (size_t i = 0; i < a.size(); ++i)
        CHECK(torch::allclose(a[i], b[i], 1e-4, 1e-5));
    }
  }
  gn_model->eval();
  {
    torch::NoGradGuard no_grad;
    gn_model->detection_settings().score_thresh = 0.0;
    const ModelOutput out = gn_model->forward({torch::rand({3, 96, 128})});
    REQUIRE(out.images.size() == 1);
    CHECK(out.images[0].instances.boxes.size(1) == 4);
  }
  // ResNeXt: NUM_GROUPS x WIDTH_PER_GROUP channels in grouped 3x3s; depth 101 has 23 res4 blocks.
  const ModelConfig msra = Detectron2Config("  BACKBONE: {NAME: build_resnet_fpn_backbone}\n");
  const TensorMap m = StateDict(*BuildModel(msra));
  CHECK(m.at("backbone.body.layer2.0.conv2.weight").sizes() == at::IntArrayRef({16, 16, 3, 3}));
  const ModelConfig fair = Detectron2Config(
      "  BACKBONE: {NAME: build_resnet_fpn_backbone}\n"
      "  RESNETS: {STEM_OUT_CHANNELS: 8, RES2_OUT_CHANNELS: 32, NUM_GROUPS: 4, WIDTH_PER_GROUP: 2,"
      " STRIDE_IN_1X1: false, DEPTH: 101}\n");
  const TensorMap x = StateDict(*BuildModel(fair));
  CHECK(x.at("backbone.body.layer2.0.conv2.weight").sizes() == at::IntArrayRef({16, 4, 3, 3}));
  CHECK(x.count("backbone.body.layer3.22.conv1.weight") == 1);
}

TEST_CASE("box regression loss type, weight and box-coder weights per head", "[config]") {
  ModelConfig c = ModelConfig::FromYaml(
      YAML::Load("MODEL: {RPN: {BBOX_REG_LOSS_TYPE: giou, BBOX_REG_LOSS_WEIGHT: 2.0},"
                 " ROI_BOX_HEAD: {BBOX_REG_LOSS_TYPE: giou, BBOX_REG_LOSS_WEIGHT: 10.0,"
                 " BBOX_REG_WEIGHTS: [20, 20, 10, 10]}}"),
      "giou.yaml");
  CHECK(c.rpn_bbox_reg_loss_type == "giou");
  CHECK(c.rpn_bbox_reg_loss_weight == 2.0);
  CHECK(c.bbox_reg_loss_type == "giou");
  CHECK(c.bbox_reg_loss_weight == 10.0);
  CHECK(c.bbox_reg_weights == std::array<double, 4>{20, 20, 10, 10});
  CHECK(ModelConfig::FromYaml(YAML::Load(c.ToYaml()), "round trip").ToYaml() == c.ToYaml());
  CHECK(ModelConfig().bbox_reg_loss_type == "smooth_l1");
  CHECK_THROWS_WITH(ModelConfig::FromYaml(
                        YAML::Load("MODEL: {ROI_BOX_HEAD: {BBOX_REG_LOSS_TYPE: l1}}"), "l1.yaml"),
                    Catch::Contains("l1.yaml") &&
                        Catch::Contains("MODEL.ROI_BOX_HEAD.BBOX_REG_LOSS_TYPE") &&
                        Catch::Contains("must be smooth_l1, giou, diou or ciou, got \"l1\""));
  CHECK(ModelConfig::FromYaml(YAML::Load("MODEL: {RPN: {BBOX_REG_LOSS_TYPE: diou},"
                                         " ROI_BOX_HEAD: {BBOX_REG_LOSS_TYPE: ciou}}"),
                              "iou.yaml")
            .bbox_reg_loss_type == "ciou");
  // SMOOTH_L1_BETA: torchvision's 1/9 unless set; Detectron2's configs default to 0 (L1).
  CHECK(ModelConfig().rpn_smooth_l1_beta == 1.0 / 9);
  CHECK(ModelConfig().box_smooth_l1_beta == 1.0 / 9);
  const ModelConfig d2 = ModelConfig::FromYaml(
      YAML::Load("MODEL: {BACKBONE: {NAME: build_resnet_fpn_backbone},"
                 " ROI_BOX_HEAD: {SMOOTH_L1_BETA: 0.5}, RPN: {LOSS_WEIGHT: 2.0}}"),
      "d2.yaml");
  CHECK(d2.rpn_smooth_l1_beta == 0.0);
  CHECK(d2.box_smooth_l1_beta == 0.5);
  CHECK(d2.rpn_loss_weight == 2.0);
  CHECK(ModelConfig::FromYaml(YAML::Load(d2.ToYaml()), "round trip").box_smooth_l1_beta == 0.5);
  CHECK_THROWS_WITH(
      ModelConfig::FromYaml(YAML::Load("MODEL: {RPN: {SMOOTH_L1_BETA: -1}}"), "b.yaml"),
      Catch::Contains("MODEL.RPN.SMOOTH_L1_BETA"));
  CHECK_THROWS_WITH(
      ModelConfig::FromYaml(YAML::Load("MODEL: {ROI_BOX_HEAD: {BBOX_REG_WEIGHTS: [1, 1, 0, 1]}}"),
                            "w.yaml"),
      Catch::Contains("BBOX_REG_WEIGHTS") && Catch::Contains("> 0"));
  CHECK_THROWS_WITH(
      ModelConfig::FromYaml(YAML::Load("MODEL: {RPN: {BBOX_REG_LOSS_WEIGHT: -1}}"), "n.yaml"),
      Catch::Contains("MODEL.RPN.BBOX_REG_LOSS_WEIGHT"));
}

TEST_CASE("transform resizes like torchvision and pads to a multiple of 32", "[transform]") {
  ModelConfig c = SmallConfig();
  auto model = BuildModel(c);
  model->eval();
  // 480 x 640: scale = min(800/480, 1333/640) = 1.6667 -> 800 x 1066, padded to 800 x 1088.
  // 300 x 1000: scale = min(800/300, 1333/1000) = 1.333 -> 399 x 1333.
  std::vector<at::Tensor> images = {torch::full({3, 480, 640}, 0.5),
                                    torch::full({3, 300, 1000}, 0.25)};
  std::vector<ImageTarget> targets(2);
  targets[0].boxes = torch::tensor({{10.f, 20.f, 110.f, 220.f}});
  targets[0].labels = torch::tensor({1}, torch::kLong);
  targets[0].masks = torch::ones({1, 480, 640}, torch::kByte);
  targets[1].boxes = torch::zeros({0, 4});
  targets[1].labels = torch::zeros({0}, torch::kLong);
  targets[1].masks = torch::zeros({0, 300, 1000}, torch::kByte);
  ImageBatch batch = model->Transform(images, &targets);
  CHECK(batch.image_sizes[0] == std::array<int64_t, 2>{800, 1066});
  CHECK(batch.image_sizes[1] == std::array<int64_t, 2>{399, 1333});
  CHECK(batch.original_sizes[1] == std::array<int64_t, 2>{300, 1000});
  CHECK(batch.tensors.sizes() == at::IntArrayRef({2, 3, 800, 1344}));
  // Normalised constant image: (0.5 - 0.485) / 0.229 in the red channel; zero padding.
  CHECK(batch.tensors[0][0][10][10].item<float>() == Approx((0.5 - 0.485) / 0.229).epsilon(1e-5));
  CHECK(batch.tensors[0][2][5][5].item<float>() == Approx((0.5 - 0.406) / 0.225).epsilon(1e-5));
  CHECK(batch.tensors[0][0][799][1070].item<float>() == 0.0f);
  CHECK(batch.tensors[1][0][500][10].item<float>() == 0.0f);
  // Targets follow the image: boxes scaled by new/old size, masks resized.
  const float rw = 1066.f / 640.f, rh = 800.f / 480.f;
  CHECK(targets[0].boxes[0][0].item<float>() == Approx(10 * rw));
  CHECK(targets[0].boxes[0][3].item<float>() == Approx(220 * rh));
  CHECK(targets[0].masks.sizes() == at::IntArrayRef({1, 800, 1066}));
  CHECK(targets[1].masks.sizes() == at::IntArrayRef({0, 399, 1333}));
}

TEST_CASE("safetensors round trip keeps names, dtypes, shapes and bytes", "[safetensors]") {
  TensorMap tensors;
  tensors["a.weight"] = torch::randn({3, 4});
  tensors["b"] = torch::arange(10, torch::kLong);
  tensors["c.half"] = torch::randn({2, 2}).to(torch::kHalf);
  tensors["d.bytes"] = torch::randint(0, 255, {5}, torch::kByte);
  tensors["e.scalar"] = torch::tensor(3.5f).reshape({});
  tensors["f.empty"] = torch::zeros({0, 4});
  const auto path = TempPath("round.safetensors");
  WriteSafetensors(path, tensors, {{"format", "pt"}});
  TensorMap back = ReadSafetensors(path);
  REQUIRE(back.size() == tensors.size());
  for (const auto& [k, v] : tensors) {
    INFO(k);
    CHECK(back.at(k).scalar_type() == v.scalar_type());
    CHECK(back.at(k).sizes() == v.sizes());
    CHECK(torch::equal(back.at(k), v));
  }
  // The header is padded to 8 bytes as the format recommends.
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | static_cast<uint8_t>(bytes[static_cast<size_t>(i)]);
  CHECK(n % 8 == 0);
}

TEST_CASE("safetensors rejects malformed files with the file name in the message",
          "[safetensors]") {
  TensorMap tensors{{"w", torch::randn({4, 4})}};
  const std::string good = SerializeSafetensors(tensors);
  const auto truncated = TempPath("truncated.safetensors");
  WriteBytes(truncated, good.substr(0, good.size() - 10));
  CHECK_THROWS_WITH(ReadSafetensors(truncated), Catch::Contains(truncated.string()) &&
                                                    Catch::Contains("'w'") &&
                                                    Catch::Contains("outside"));
  CHECK_THROWS_WITH(ParseSafetensors(good.substr(0, 5), "short"), Catch::Contains("short"));
  CHECK_THROWS_WITH(ParseSafetensors(good.substr(0, 20), "cut header"),
                    Catch::Contains("exceeds the file size"));
  CHECK_THROWS_WITH(ParseSafetensors(Header("[1,2]", ""), "array"),
                    Catch::Contains("not a JSON object"));
  CHECK_THROWS_WITH(ParseSafetensors(Header("{not json", ""), "garbage"),
                    Catch::Contains("not valid JSON"));
  CHECK_THROWS_WITH(
      ParseSafetensors(Header(R"({"x":{"dtype":"F8_E9","shape":[1],"data_offsets":[0,1]}})", "a"),
                       "dtype"),
      Catch::Contains("unknown dtype 'F8_E9'") && Catch::Contains("'x'"));
  CHECK_THROWS_WITH(
      ParseSafetensors(Header(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", "abcd"),
                       "size"),
      Catch::Contains("dtype x shape needs 8"));
  CHECK_THROWS_WITH(
      ParseSafetensors(Header(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                              R"("y":{"dtype":"F32","shape":[1],"data_offsets":[2,6]}})",
                              "abcdefgh"),
                       "overlap"),
      Catch::Contains("overlap"));
  CHECK_THROWS_WITH(ParseSafetensors(Header(R"({"x":{"dtype":"F32","shape":[1]}})", ""), "fields"),
                    Catch::Contains("data_offsets"));
  CHECK_THROWS_WITH(ReadSafetensors(TempPath("absent.safetensors")),
                    Catch::Contains("cannot open"));
}

TEST_CASE("loading weights rejects wrong shapes, unknown and missing keys", "[safetensors]") {
  ModelConfig c = SmallConfig();
  auto model = BuildModel(c);
  TensorMap state;
  for (const auto& [k, v] : StateDict(*model))
    state[k] = v.clone();
  const auto path = TempPath("model.safetensors");

  SECTION("exact state loads and copies values") {
    state["rpn.head.cls_logits.bias"].fill_(0.25);
    WriteSafetensors(path, state);
    auto other = BuildModel(c);
    LoadStateDict(*other, ReadSafetensors(path), path.string());
    CHECK(
        torch::allclose(StateDict(*other).at("rpn.head.cls_logits.bias"), torch::full({3}, 0.25)));
  }
  SECTION("wrong shape") {
    state["roi_heads.box_predictor.cls_score.weight"] = torch::zeros({7, 32});
    WriteSafetensors(path, state);
    CHECK_THROWS_WITH(LoadStateDict(*model, ReadSafetensors(path), path.string()),
                      Catch::Contains(path.string()) &&
                          Catch::Contains("roi_heads.box_predictor.cls_score.weight") &&
                          Catch::Contains("NUM_CLASSES"));
  }
  SECTION("unknown key") {
    state["backbone.body.layer9.weight"] = torch::zeros({1});
    WriteSafetensors(path, state);
    CHECK_THROWS_WITH(
        LoadStateDict(*model, ReadSafetensors(path), path.string()),
        Catch::Contains("backbone.body.layer9.weight") && Catch::Contains("not a parameter"));
  }
  SECTION("missing key") {
    state.erase("backbone.fpn.inner_blocks.0.0.bias");
    WriteSafetensors(path, state);
    CHECK_THROWS_WITH(
        LoadStateDict(*model, ReadSafetensors(path), path.string()),
        Catch::Contains("backbone.fpn.inner_blocks.0.0.bias") && Catch::Contains("missing"));
  }
  SECTION("wrong dtype") {
    state["rpn.head.bbox_pred.bias"] = state["rpn.head.bbox_pred.bias"].to(torch::kHalf);
    WriteSafetensors(path, state);
    CHECK_THROWS_WITH(LoadStateDict(*model, ReadSafetensors(path), path.string()),
                      Catch::Contains("rpn.head.bbox_pred.bias") && Catch::Contains("dtype"));
  }
}

namespace {

// A model dir (weights, config.yaml, classes.json) of the small model with seeded weights.
std::filesystem::path WriteSmallModelDir() {
  const auto dir = TempPath("model_dir");
  std::filesystem::create_directories(dir);
  torch::manual_seed(7);
  auto model = BuildModel(SmallConfig());
  WriteSafetensors(dir / "model.safetensors", StateDict(*model));
  std::ofstream(dir / "config.yaml") << SmallConfig().ToYaml();
  std::ofstream(dir / "classes.json")
      << R"([{"id": 1, "name": "a"}, {"id": 5, "name": "b"}, {"id": 9, "name": "c"}])";
  return dir;
}

std::vector<uint8_t> NoiseImage(int64_t height, int64_t width, int seed) {
  torch::manual_seed(seed);
  const at::Tensor pixels = torch::randint(0, 256, {height * width * 3}, torch::kByte);
  return {pixels.data_ptr<uint8_t>(), pixels.data_ptr<uint8_t>() + pixels.numel()};
}

void CheckSameDetections(const ImageDetections& got, const ImageDetections& want) {
  REQUIRE(got.height == want.height);
  REQUIRE(got.width == want.width);
  REQUIRE(got.detections.size() == want.detections.size());
  for (size_t k = 0; k < got.detections.size(); ++k) {
    const Detection& a = got.detections[k];
    const Detection& b = want.detections[k];
    CHECK(a.box == b.box);
    CHECK(a.score == b.score);
    CHECK(a.label == b.label);
    CHECK(a.category_id == b.category_id);
    CHECK(a.label_name == b.label_name);
    CHECK(a.mask == b.mask);
    CHECK(a.mask_rle.counts == b.mask_rle.counts);
  }
}

}  // namespace

TEST_CASE("mask pixels packed eight to a byte unpack to themselves from any offset",
          "[inference]") {
  for (const int64_t n : {0, 1, 7, 8, 9, 1000, 1001}) {
    torch::manual_seed(n);
    const at::Tensor pixels = torch::randint(0, 2, {n}, torch::kByte);
    const at::Tensor packed = PackMaskBits(pixels);
    REQUIRE(packed.scalar_type() == torch::kByte);
    REQUIRE(packed.numel() == (n + 7) / 8);
    const uint8_t* p = pixels.data_ptr<uint8_t>();
    const uint8_t* b = packed.data_ptr<uint8_t>();
    for (int64_t byte = 0; byte < packed.numel(); ++byte) {
      int want = 0;  // most significant bit first, unused bits 0
      for (int64_t bit = 0; bit < 8; ++bit)
        want |= (8 * byte + bit < n ? p[8 * byte + bit] : 0) << (7 - bit);
      CHECK(static_cast<int>(b[byte]) == want);
    }
    for (const int64_t begin : {int64_t{0}, n / 3, n / 2}) {
      const int64_t count = n - begin - n / 5;
      if (count < 0)
        continue;
      std::vector<uint8_t> out(static_cast<size_t>(count), 7);
      UnpackMaskBits(b, begin, count, out.data());
      CHECK(std::equal(out.begin(), out.end(), p + begin));
    }
  }
  CHECK_THROWS_WITH(PackMaskBits(torch::zeros({2, 4}, torch::kByte)), Catch::Contains("1-D uint8"));
}

TEST_CASE("pixel masks come back as their paste boxes and encode as the whole masks do",
          "[inference]") {
  const auto dir = WriteSmallModelDir();
  auto model = InferenceModel::Load(dir, InferenceOptions{});
  const int64_t height = 90, width = 120;
  std::vector<uint8_t> image = NoiseImage(height, width, 3);
  PredictOptions options;
  options.score_threshold = 0.0f;
  options.max_detections = 50;
  options.mask_rle = MaskRleWhere::kHost;
  const auto pixels = model->Predict({{image.data(), height, width}}, options);
  // The device encoder (here on the CPU) encodes each whole pasted mask, so equal strings mean
  // nothing of a mask lies outside its region.
  options.mask_rle = MaskRleWhere::kAlways;
  const auto encoded = model->Predict({{image.data(), height, width}}, options);
  REQUIRE(pixels[0].detections.size() == encoded[0].detections.size());
  REQUIRE_FALSE(pixels[0].detections.empty());
  size_t cropped = 0, ones = 0;
  for (size_t k = 0; k < pixels[0].detections.size(); ++k) {
    const Detection& d = pixels[0].detections[k];
    const mrcnn::data::MaskRegion& r = d.mask_region;
    CHECK(d.mask_rle.counts.empty());
    CHECK((r.x >= 0 && r.y >= 0 && r.width >= 1 && r.height >= 1));
    CHECK((r.x + r.width <= width && r.y + r.height <= height));
    REQUIRE(d.mask.size() == static_cast<size_t>(r.width * r.height));
    CHECK(mrcnn::data::EncodeMaskRegion(d.mask.data(), r, height, width).counts ==
          encoded[0].detections[k].mask_rle.counts);
    cropped += r.width * r.height < height * width ? 1 : 0;
    ones += static_cast<size_t>(std::count(d.mask.begin(), d.mask.end(), uint8_t{1}));
  }
  CHECK(cropped > 0);
  CHECK(ones > 0);
  for (const char* name : {"model.safetensors", "config.yaml", "classes.json"}) {
    ::unlink((dir / name).c_str());
  }
  ::rmdir(dir.c_str());
}

TEST_CASE("a started batch finishes on another thread with Predict's answers while the next starts",
          "[inference]") {
  const auto dir = WriteSmallModelDir();
  auto model = InferenceModel::Load(dir, InferenceOptions{});
  std::vector<uint8_t> first = NoiseImage(60, 80, 1);
  std::vector<uint8_t> second = NoiseImage(72, 64, 2);
  PredictOptions options;
  options.score_threshold = 0.0f;
  options.max_detections = 20;
  for (const MaskRleWhere where : {MaskRleWhere::kHost, MaskRleWhere::kAlways}) {
    options.mask_rle = where;
    const auto want_first = model->Predict({{first.data(), 60, 80}}, options);
    const auto want_second =
        model->Predict({{second.data(), 72, 64}, {first.data(), 60, 80}}, options);
    REQUIRE_FALSE(want_first[0].detections.empty());
    const Detection& top = want_first[0].detections[0];
    CHECK((where == MaskRleWhere::kAlways ? !top.mask_rle.counts.empty() : !top.mask.empty()));

    std::vector<uint8_t> first_copy = first;
    auto pending_first = model->Start({{first_copy.data(), 60, 80}}, options);
    std::fill(first_copy.begin(), first_copy.end(), 0);  // the images need only outlive Start
    auto finishing = std::async(std::launch::async, [&] { return pending_first->Finish(); });
    auto pending_second = model->Start({{second.data(), 72, 64}, {first.data(), 60, 80}}, options);
    const auto got_first = finishing.get();
    const auto got_second = pending_second->Finish();
    REQUIRE(got_first.size() == 1);
    REQUIRE(got_second.size() == 2);
    CheckSameDetections(got_first[0], want_first[0]);
    CheckSameDetections(got_second[0], want_second[0]);
    CheckSameDetections(got_second[1], want_second[1]);
  }
  CHECK(model->Start({}, options)->Finish().empty());
  // POSIX calls: this binary's std::filesystem::remove_all binds to libtorch's own copy, which
  // crashes.
  for (const char* name : {"model.safetensors", "config.yaml", "classes.json"}) {
    ::unlink((dir / name).c_str());
  }
  ::rmdir(dir.c_str());
}

TEST_CASE("Detectron2 keys for blocks that are not built are refused, naming the key",
          "[config]") {
  const std::string base = "MODEL: {BACKBONE: {NAME: build_resnet_fpn_backbone}, ";
  struct Refused {
    std::string yaml, key;
  };
  const Refused cases[] = {
      {"RESNETS: {DEFORM_ON_PER_STAGE: [False, True, True, True], OUT_FEATURES: [res4]}, "
       "ROI_HEADS: {NAME: Res5ROIHeads}}",
       "MODEL.RESNETS.DEFORM_ON_PER_STAGE"},
      {"RESNETS: {DEFORM_ON_PER_STAGE: [False, True]}}", "MODEL.RESNETS.DEFORM_ON_PER_STAGE"},
      {"RESNETS: {DEFORM_NUM_GROUPS: 3}}", "MODEL.RESNETS.DEFORM_NUM_GROUPS"},
      {"FPN: {NORM: nnSyncBN}}", "MODEL.FPN.NORM"},
      {"ROI_BOX_HEAD: {NORM: LN}}", "MODEL.ROI_BOX_HEAD.NORM"},
      {"ROI_MASK_HEAD: {NORM: BatchNorm}}", "MODEL.ROI_MASK_HEAD.NORM"},
      {"RESNETS: {NORM: naiveSyncBN}}", "MODEL.RESNETS.NORM"},
  };
  for (const Refused& r : cases) {
    INFO(r.yaml);
    CHECK_THROWS_WITH(ModelConfig::FromYaml(YAML::Load(base + r.yaml), "dconv.yaml"),
                      Catch::Contains("dconv.yaml") && Catch::Contains(r.key));
  }
  // Their defaults, as every Detectron2 config dump writes them, are accepted.
  const ModelConfig plain = ModelConfig::FromYaml(
      YAML::Load(base +
                 "RESNETS: {DEFORM_ON_PER_STAGE: [false, false, false, false]}, FPN: {NORM: ''}, "
                 "ROI_BOX_HEAD: {NORM: ''}, ROI_MASK_HEAD: {NORM: '', CLS_AGNOSTIC_MASK: false}}"),
      "plain.yaml");
  CHECK(plain.detectron2());
}

