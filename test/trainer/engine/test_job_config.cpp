#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <random>

#include "common/config_error.h"
#include "trainer/engine/config/job_config.h"
#include "trainer/engine/config/model_zoo.h"

using mrcnn::common::ConfigError;
using mrcnn::common::EnvMap;
using namespace mrcnn::engine;
namespace fs = std::filesystem;

namespace {

struct JobTree {
  fs::path root;
  JobTree() {
    std::random_device rd;
    root = fs::temp_directory_path() / ("engine_job_" + std::to_string(rd()));
    fs::create_directories(root / "ml/input/data/train");
    fs::create_directories(root / "ml/input/config");
    fs::create_directories(root / "configs");
    fs::create_directories(root / "ml/code");
  }
  ~JobTree() { fs::remove_all(root); }
  fs::path Write(const fs::path& rel, const std::string& text) const {
    fs::path p = root / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
    return p;
  }
  EnvMap Env() const {
    return {{"SAGEMAKER_BASE_DIR", (root / "ml").string()},
            {"MRCNN_CONFIG_DIR", (root / "configs").string()}};
  }
};

std::string ErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "<no error>";
}

}  // namespace

TEST_CASE("hyperparameter argv as the toolkit encodes it", "[job]") {
  TrainJobArgs a =
      ParseTrainJobArgs({"--config-file", "x.yaml", "--eval-only", "false", "--local-config-file",
                         "my.yaml", "--opts", "SOLVER.BASE_LR 0.1", "--resume", "true"});
  CHECK(a.config_file == "x.yaml");
  CHECK(a.local_config_file == "my.yaml");
  CHECK(a.opts == "SOLVER.BASE_LR 0.1");
  CHECK(a.resume == true);
  CHECK_FALSE(a.eval_only);

  TrainJobArgs b = ParseTrainJobArgs({"--eval_only=True", "--resume", "False"});
  CHECK(b.eval_only);
  CHECK(b.resume == false);
  CHECK_FALSE(ParseTrainJobArgs({}).resume.has_value());

  CHECK_THAT(ErrorOf([] {
               ParseTrainJobArgs({"--config-fil", "x"});
             }),
             Catch::Contains("did you mean \"config-file\""));
  CHECK_THAT(ErrorOf([] {
               ParseTrainJobArgs({"--resume", "maybe"});
             }),
             Catch::Contains("must be true or false"));
  CHECK_THAT(ErrorOf([] { ParseTrainJobArgs({"--opts"}); }), Catch::Contains("no value"));
  CHECK_THAT(ErrorOf([] { ParseTrainJobArgs({"stray"}); }), Catch::Contains("stray"));
}

TEST_CASE("config-file, local-config-file and opts merge in that order", "[job]") {
  JobTree t;
  t.Write("configs/base.yaml", "SOLVER: {BASE_LR: 0.5, MAX_ITER: 10, GAMMA: 0.5}\n");
  t.Write("configs/image.yaml", "_BASE_: base.yaml\nSOLVER: {MAX_ITER: 20}\n");
  t.Write("ml/code/mine.yaml", "SOLVER: {MAX_ITER: 30, GAMMA: 0.25}\n");
  TrainJobArgs args;
  args.config_file = "image.yaml";
  args.local_config_file = "mine.yaml";
  args.opts = "SOLVER.GAMMA 0.125";
  TrainJob job = ResolveTrainJob(args, t.Env(), "");
  CHECK(job.config.GetFloat("SOLVER.BASE_LR") == 0.5);
  CHECK(job.config.GetInt("SOLVER.MAX_ITER") == 30);
  CHECK(job.config.GetFloat("SOLVER.GAMMA") == 0.125);
  REQUIRE(job.config_sources.size() == 4);
  CHECK(job.config_sources.back() == "opts");
  CHECK(job.train_dir == t.root / "ml/input/data/train");
  CHECK_FALSE(job.test_dir.has_value());
  CHECK(job.model_dir == t.root / "ml/model");
  CHECK(job.output_dir == t.root / "ml/output/data");
  CHECK(job.checkpoint_dir == t.root / "ml/checkpoints");
  CHECK_FALSE(job.weights.has_value());

  // SM_MODULE_DIR, when it is a local directory, holds the local config.
  t.Write("elsewhere/mine.yaml", "SOLVER: {MAX_ITER: 40}\n");
  EnvMap env = t.Env();
  env["SM_MODULE_DIR"] = (t.root / "elsewhere").string();
  CHECK(ResolveTrainJob(args, env, "").config.GetInt("SOLVER.MAX_ITER") == 40);
  env["SM_MODULE_DIR"] = "s3://bucket/code.tar.gz";
  CHECK(ResolveTrainJob(args, env, "").config.GetInt("SOLVER.MAX_ITER") == 30);

  // An image's default config applies only when no config-file is given.
  EnvMap with_default = t.Env();
  with_default["MRCNN_DEFAULT_CONFIG"] = "base.yaml";
  CHECK(ResolveTrainJob({}, with_default, "").config.GetInt("SOLVER.MAX_ITER") == 10);
  CHECK(ResolveTrainJob(args, with_default, "").config.GetInt("SOLVER.MAX_ITER") == 30);
}

TEST_CASE("channels, model dir, output dir and checkpoint dir from the environment", "[job]") {
  JobTree t;
  fs::create_directories(t.root / "chan/train");
  fs::create_directories(t.root / "chan/test");
  fs::create_directories(t.root / "chan/weights");
  t.Write("chan/weights/coco.safetensors", "x");
  t.Write("ml/input/config/checkpointconfig.json",
          "{\"LocalPath\": \"" + (t.root / "ckpt").string() + "\", \"S3Uri\": \"s3://b/c\"}");
  EnvMap env = t.Env();
  env["SM_CHANNEL_TRAIN"] = (t.root / "chan/train").string();
  env["SM_CHANNEL_TEST"] = (t.root / "chan/test").string();
  env["SM_CHANNEL_WEIGHTS"] = (t.root / "chan/weights").string();
  env["SM_MODEL_DIR"] = (t.root / "model").string();
  env["SM_OUTPUT_DATA_DIR"] = (t.root / "out").string();
  TrainJob job = ResolveTrainJob({}, env, "");
  CHECK(job.train_dir == t.root / "chan/train");
  CHECK(job.test_dir == t.root / "chan/test");  // "val" absent, "test" present
  CHECK(job.weights == t.root / "chan/weights/coco.safetensors");
  CHECK(job.model_dir == t.root / "model");
  CHECK(job.output_dir == t.root / "out");
  CHECK(job.checkpoint_dir == t.root / "ckpt");

  TrainJobArgs with_output;
  with_output.opts = "OUTPUT_DIR " + (t.root / "o2").string();
  CHECK(ResolveTrainJob(with_output, env, "").output_dir == t.root / "o2");

  TrainJobArgs missing_weights;
  missing_weights.opts = "MODEL.WEIGHTS other.safetensors";
  CHECK_THAT(ErrorOf([&] { ResolveTrainJob(missing_weights, env, ""); }),
             Catch::Contains("MODEL.WEIGHTS"));

  t.Write("chan/weights/second.safetensors", "y");
  CHECK_THAT(ErrorOf([&] { ResolveTrainJob({}, env, ""); }), Catch::Contains("2 checkpoint files"));
}

TEST_CASE("missing files and channels are errors naming what to fix", "[job]") {
  JobTree t;
  TrainJobArgs args;
  args.config_file = "nope.yaml";
  std::string err = ErrorOf([&] { ResolveTrainJob(args, t.Env(), ""); });
  CHECK_THAT(err, Catch::Contains("config-file"));
  CHECK_THAT(err, Catch::Contains("MRCNN_CONFIG_DIR"));

  TrainJobArgs local;
  local.local_config_file = "mine.yaml";
  CHECK_THAT(ErrorOf([&] { ResolveTrainJob(local, t.Env(), ""); }),
             Catch::Contains("local-config-file"));

  // Names the system refuses to look up (over NAME_MAX) are "does not exist" errors naming
  // the hyperparameter, not std::filesystem exceptions.
  TrainJobArgs too_long;
  too_long.config_file = std::string(300, 'c') + ".yaml";
  CHECK_THAT(ErrorOf([&] { ResolveTrainJob(too_long, t.Env(), ""); }),
             Catch::Contains("config-file"));
  TrainJobArgs local_too_long;
  local_too_long.local_config_file = std::string(300, 'l') + ".yaml";
  CHECK_THAT(ErrorOf([&] { ResolveTrainJob(local_too_long, t.Env(), ""); }),
             Catch::Contains("local-config-file"));

  fs::remove_all(t.root / "ml/input/data/train");
  CHECK_THAT(ErrorOf([&] { ResolveTrainJob({}, t.Env(), ""); }),
             Catch::Contains("SM_CHANNEL_train"));
  TrainJobArgs eval_only;
  eval_only.eval_only = true;
  CHECK_NOTHROW(ResolveTrainJob(eval_only, t.Env(), ""));

  TrainJobArgs bad_opts;
  bad_opts.opts = "SOLVER.BASE_LR";
  CHECK_THAT(ErrorOf([&] { ResolveTrainJob(bad_opts, t.Env(), ""); }), Catch::Contains("opts"));
}

TEST_CASE("the configs dir: env, then beside the executable", "[job]") {
  JobTree t;
  CHECK(ConfigDir(t.Env(), "") == t.root / "configs");
  fs::create_directories(t.root / "build/bin");
  CHECK(ConfigDir({}, t.root / "build/bin/trainer") == fs::weakly_canonical(t.root / "configs"));
  CHECK(ConfigDir({}, "") == "/opt/mrcnn/configs");
}

TEST_CASE("a Pipe channel is refused naming inputdataconfig.json, the channel and File/FastFile",
          "[job]") {
  JobTree t;
  // SageMaker makes no directory for a Pipe channel, only FIFOs beside where it would be.
  fs::remove_all(t.root / "ml/input/data/train");
  t.Write("ml/input/config/inputdataconfig.json",
          R"({"train": {"TrainingInputMode": "Pipe", "S3DistributionType": "FullyReplicated"}})");
  std::string err = ErrorOf([&] { ResolveTrainJob({}, t.Env(), ""); });
  CHECK_THAT(
      err,
      Catch::Contains(
          "inputdataconfig.json: \"train.TrainingInputMode\" is \"Pipe\" for channel \"train\""));
  CHECK_THAT(err, Catch::Contains("Pipe mode is not supported"));
  CHECK_THAT(err, Catch::Contains("\"File\" or \"FastFile\""));
  CHECK_THAT(err, !Catch::Contains("is missing"));

  // Under the entrypoint the channel comes as SM_CHANNEL_TRAIN; the file still decides.
  EnvMap env = t.Env();
  env["SM_CHANNEL_TRAIN"] = (t.root / "ml/input/data/train").string();
  CHECK_THAT(ErrorOf([&] { ResolveTrainJob({}, env, ""); }),
             Catch::Contains("Pipe mode is not supported"));

  // The evaluated channel too; a Pipe channel the trainer does not read is left alone.
  fs::create_directories(t.root / "ml/input/data/train");
  t.Write("ml/input/config/inputdataconfig.json",
          R"({"train": {"TrainingInputMode": "File"}, "val": {"TrainingInputMode": "Pipe"}})");
  CHECK_THAT(ErrorOf([&] { ResolveTrainJob({}, t.Env(), ""); }),
             Catch::Contains("\"val.TrainingInputMode\""));
  t.Write(
      "ml/input/config/inputdataconfig.json",
      R"({"train": {"TrainingInputMode": "FastFile"}, "extra": {"TrainingInputMode": "Pipe"}})");
  CHECK_NOTHROW(ResolveTrainJob({}, t.Env(), ""));
}

TEST_CASE("a FIFO <channel>_0 where the channel dir should be is Pipe mode", "[job]") {
  JobTree t;
  fs::remove_all(t.root / "ml/input/data/train");
  const fs::path fifo = t.root / "ml/input/data/train_0";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  std::string err = ErrorOf([&] { ResolveTrainJob({}, t.Env(), ""); });
  CHECK_THAT(err, Catch::Contains("inputdataconfig.json"));
  CHECK_THAT(err, Catch::Contains(
                      "\"train.TrainingInputMode\" looks like \"Pipe\" for channel \"train\""));
  CHECK_THAT(err, Catch::Contains(fifo.string() + " is a FIFO"));
  CHECK_THAT(err, Catch::Contains("use \"File\" or \"FastFile\""));
  // A plain file of that name is not a Pipe channel: the usual missing-channel error.
  fs::remove(fifo);
  t.Write("ml/input/data/train_0", "x");
  CHECK_THAT(ErrorOf([&] { ResolveTrainJob({}, t.Env(), ""); }), Catch::Contains("is missing"));
}

TEST_CASE("ShardedByS3Key on several hosts is refused, suggesting FullyReplicated", "[job]") {
  JobTree t;
  t.Write("ml/input/config/inputdataconfig.json",
          R"({"train": {"TrainingInputMode": "File", "S3DistributionType": "ShardedByS3Key"}})");
  t.Write("ml/input/config/hyperparameters.json", "{}");
  // One host gets every object, so sharding changes nothing.
  t.Write("ml/input/config/resourceconfig.json",
          R"({"current_host": "algo-1", "hosts": ["algo-1"]})");
  CHECK_NOTHROW(ResolveTrainJob({}, t.Env(), ""));

  t.Write("ml/input/config/resourceconfig.json",
          R"({"current_host": "algo-2", "hosts": ["algo-1", "algo-2", "algo-3"]})");
  std::string err = ErrorOf([&] { ResolveTrainJob({}, t.Env(), ""); });
  CHECK_THAT(err,
             Catch::Contains(
                 "inputdataconfig.json: \"train.S3DistributionType\" is \"ShardedByS3Key\" for "
                 "channel \"train\" on 3 hosts"));
  CHECK_THAT(err, Catch::Contains("\"FullyReplicated\""));

  t.Write("ml/input/config/inputdataconfig.json",
          R"({"train": {"TrainingInputMode": "File", "S3DistributionType": "FullyReplicated"},
              "weights": {"S3DistributionType": "ShardedByS3Key"}})");
  // weights is not there, but the declaration alone says this host would get part of it.
  CHECK_THAT(ErrorOf([&] { ResolveTrainJob({}, t.Env(), ""); }),
             Catch::Contains("\"weights.S3DistributionType\""));
  t.Write("ml/input/config/inputdataconfig.json",
          R"({"train": {"TrainingInputMode": "File", "S3DistributionType": "FullyReplicated"}})");
  CHECK_NOTHROW(ResolveTrainJob({}, t.Env(), ""));
}

TEST_CASE("Detectron2 model-zoo names resolve to the shipped configs", "[job][model-zoo]") {
  JobTree t;
  // The zoo configs name Detectron2's ImageNet backbones (detectron2://...): the job takes
  // the weights channel's one checkpoint file instead.
  t.Write("ml/input/data/weights/R-50.pkl", "not read here");
  EnvMap env = t.Env();
  env["MRCNN_CONFIG_DIR"] = std::string(MRCNN_SOURCE_DIR) + "/configs";
  struct Expected {
    std::string name;
    std::string backbone = "build_resnet_fpn_backbone";
    int64_t depth = 50;
    bool mask = true;
    std::string roi_heads = "StandardROIHeads";
    int64_t max_iter = 90000;
    std::string box_loss = "smooth_l1";
    bool keypoint = false;
    std::string meta_architecture = "GeneralizedRCNN";
    std::string norm = "FrozenBN";  // MODEL.RESNETS.NORM, and the FPN's and heads' ("" when FrozenBN)
    bool scratch = false;           // no MODEL.WEIGHTS, nothing frozen
    bool cls_agnostic = false;      // box regression and masks
    bool detectron1 = false;        // Detectron1-Comparisons: ROIAlign pooler, betas 0.1111/1.0
    int64_t ims_per_batch = 16;
    bool deform = false;         // deformable 3x3s in res3-res5
    std::string head_norm = "";  // the FPN's and the heads' norm when the body's is FrozenBN
  };
  const std::vector<Expected> expected = {
      {.name = "COCO-InstanceSegmentation/mask_rcnn_R_50_FPN_1x.yaml"},
      {.name = "COCO-InstanceSegmentation/mask_rcnn_R_50_FPN_3x.yaml", .max_iter = 270000},
      {.name = "COCO-InstanceSegmentation/mask_rcnn_R_50_FPN_1x_giou.yaml", .box_loss = "giou"},
      {.name = "COCO-InstanceSegmentation/mask_rcnn_R_101_FPN_1x.yaml", .depth = 101},
      {.name = "COCO-InstanceSegmentation/mask_rcnn_R_101_FPN_3x.yaml", .depth = 101, .max_iter = 270000},
      {.name = "COCO-InstanceSegmentation/mask_rcnn_X_101_32x8d_FPN_3x.yaml", .depth = 101, .max_iter = 270000},
      {.name = "COCO-InstanceSegmentation/mask_rcnn_R_50_C4_1x.yaml",
       .backbone = "build_resnet_backbone",
       .roi_heads = "Res5ROIHeads"},
      {.name = "COCO-InstanceSegmentation/mask_rcnn_R_50_C4_3x.yaml",
       .backbone = "build_resnet_backbone",
       .roi_heads = "Res5ROIHeads",
       .max_iter = 270000},
      {.name = "COCO-InstanceSegmentation/mask_rcnn_R_101_C4_3x.yaml",
       .backbone = "build_resnet_backbone",
       .depth = 101,
       .roi_heads = "Res5ROIHeads",
       .max_iter = 270000},
      {.name = "COCO-InstanceSegmentation/mask_rcnn_R_50_DC5_1x.yaml", .backbone = "build_resnet_backbone"},
      {.name = "COCO-InstanceSegmentation/mask_rcnn_R_50_DC5_3x.yaml",
       .backbone = "build_resnet_backbone",
       .max_iter = 270000},
      {.name = "COCO-InstanceSegmentation/mask_rcnn_R_101_DC5_3x.yaml",
       .backbone = "build_resnet_backbone",
       .depth = 101,
       .max_iter = 270000},
      {.name = "COCO-Detection/faster_rcnn_R_50_FPN_1x.yaml", .mask = false},
      {.name = "COCO-Detection/faster_rcnn_R_50_FPN_3x.yaml", .mask = false, .max_iter = 270000},
      {.name = "COCO-Detection/faster_rcnn_R_101_FPN_3x.yaml", .depth = 101, .mask = false, .max_iter = 270000},
      {.name = "COCO-Detection/faster_rcnn_X_101_32x8d_FPN_3x.yaml",
       .depth = 101,
       .mask = false,
       .max_iter = 270000},
      {.name = "COCO-Detection/faster_rcnn_R_50_C4_1x.yaml",
       .backbone = "build_resnet_backbone",
       .mask = false,
       .roi_heads = "Res5ROIHeads"},
      {.name = "COCO-Detection/faster_rcnn_R_50_C4_3x.yaml",
       .backbone = "build_resnet_backbone",
       .mask = false,
       .roi_heads = "Res5ROIHeads",
       .max_iter = 270000},
      {.name = "COCO-Detection/faster_rcnn_R_101_C4_3x.yaml",
       .backbone = "build_resnet_backbone",
       .depth = 101,
       .mask = false,
       .roi_heads = "Res5ROIHeads",
       .max_iter = 270000},
      {.name = "COCO-Detection/faster_rcnn_R_50_DC5_1x.yaml", .backbone = "build_resnet_backbone", .mask = false},
      {.name = "COCO-Detection/faster_rcnn_R_50_DC5_3x.yaml",
       .backbone = "build_resnet_backbone",
       .mask = false,
       .max_iter = 270000},
      {.name = "COCO-Detection/faster_rcnn_R_101_DC5_3x.yaml",
       .backbone = "build_resnet_backbone",
       .depth = 101,
       .mask = false,
       .max_iter = 270000},
      {.name = "COCO-Detection/retinanet_R_50_FPN_1x.yaml",
       .backbone = "build_retinanet_resnet_fpn_backbone",
       .mask = false,
       .meta_architecture = "RetinaNet"},
      {.name = "COCO-Detection/retinanet_R_50_FPN_3x.yaml",
       .backbone = "build_retinanet_resnet_fpn_backbone",
       .mask = false,
       .max_iter = 270000,
       .meta_architecture = "RetinaNet"},
      {.name = "COCO-Detection/retinanet_R_101_FPN_3x.yaml",
       .backbone = "build_retinanet_resnet_fpn_backbone",
       .depth = 101,
       .mask = false,
       .max_iter = 270000,
       .meta_architecture = "RetinaNet"},
      {.name = "COCO-Keypoints/keypoint_rcnn_R_50_FPN_1x.yaml", .mask = false, .keypoint = true},
      {.name = "COCO-Keypoints/keypoint_rcnn_R_50_FPN_3x.yaml",
       .mask = false,
       .max_iter = 270000,
       .keypoint = true},
      {.name = "COCO-Keypoints/keypoint_rcnn_R_101_FPN_3x.yaml",
       .depth = 101,
       .mask = false,
       .max_iter = 270000,
       .keypoint = true},
      {.name = "COCO-Keypoints/keypoint_rcnn_X_101_32x8d_FPN_3x.yaml",
       .depth = 101,
       .mask = false,
       .max_iter = 270000,
       .keypoint = true},
      {.name = "Misc/cascade_mask_rcnn_R_50_FPN_1x.yaml", .roi_heads = "CascadeROIHeads"},
      {.name = "Misc/cascade_mask_rcnn_R_50_FPN_3x.yaml",
       .roi_heads = "CascadeROIHeads",
       .max_iter = 270000},
      {.name = "Misc/mask_rcnn_R_50_FPN_3x_gn.yaml", .max_iter = 270000, .norm = "GN"},
      {.name = "Misc/scratch_mask_rcnn_R_50_FPN_3x_gn.yaml", .max_iter = 270000, .norm = "GN", .scratch = true},
      {.name = "Misc/scratch_mask_rcnn_R_50_FPN_9x_gn.yaml",
       .max_iter = 202500,
       .norm = "GN",
       .scratch = true,
       .ims_per_batch = 64},
      {.name = "Misc/mask_rcnn_R_50_FPN_1x_cls_agnostic.yaml", .cls_agnostic = true},
      {.name = "Misc/mask_rcnn_R_50_FPN_1x_dconv_c3-c5.yaml", .deform = true},
      {.name = "Misc/mask_rcnn_R_50_FPN_3x_dconv_c3-c5.yaml", .max_iter = 270000, .deform = true},
      {.name = "Detectron1-Comparisons/faster_rcnn_R_50_FPN_noaug_1x.yaml", .mask = false, .detectron1 = true},
      {.name = "Detectron1-Comparisons/mask_rcnn_R_50_FPN_noaug_1x.yaml", .detectron1 = true},
      {.name = "Detectron1-Comparisons/keypoint_rcnn_R_50_FPN_1x.yaml",
       .mask = false,
       .keypoint = true,
       .detectron1 = true}};
  REQUIRE(SupportedModelZooNames().size() == expected.size());
  for (const auto& e : expected) {
    for (const std::string& written : {e.name, "detectron2://" + e.name, "configs/" + e.name}) {
      INFO(written);
      TrainJobArgs args;
      args.config_file = written;
      const TrainJob job = ResolveTrainJob(args, env, "");
      CHECK(job.config.GetString("MODEL.BACKBONE.NAME") == e.backbone);
      CHECK(job.config.GetInt("MODEL.RESNETS.DEPTH") == e.depth);
      CHECK(job.config.GetBool("MODEL.MASK_ON") == e.mask);
      CHECK(job.config.GetBool("MODEL.KEYPOINT_ON") == e.keypoint);
      const bool retinanet = e.meta_architecture == "RetinaNet";
      CHECK(job.config.GetString("MODEL.META_ARCHITECTURE") == e.meta_architecture);
      // RetinaNet: its own class count, the FPN over res3-res5, three sizes per level.
      CHECK(job.config.GetInt(retinanet ? "MODEL.RETINANET.NUM_CLASSES" : "MODEL.ROI_HEADS.NUM_CLASSES") ==
            (e.keypoint ? 1 : 80));
      if (retinanet) {
        CHECK(job.config.GetStringList("MODEL.FPN.IN_FEATURES") == StringList{"res3", "res4", "res5"});
        CHECK(job.config.GetStringList("MODEL.RESNETS.OUT_FEATURES") == StringList{"res3", "res4", "res5"});
        CHECK(job.config.GetFloat("MODEL.RETINANET.SMOOTH_L1_LOSS_BETA") == 0.0);
        CHECK(job.config.GetFloatList("MODEL.RETINANET.IOU_THRESHOLDS") == std::vector<double>{0.4, 0.5});
      }
      CHECK(job.config.GetString("MODEL.ROI_HEADS.NAME") == e.roi_heads);
      CHECK(job.config.GetString("INPUT.FORMAT") == "BGR");
      CHECK(job.config.GetInt("SOLVER.MAX_ITER") == e.max_iter);
      CHECK(job.config.GetInt("SOLVER.IMS_PER_BATCH") == e.ims_per_batch);
      CHECK(job.config.GetFloat("SOLVER.BASE_LR") ==
            Approx(retinanet ? 0.01 : 0.02 * static_cast<double>(e.ims_per_batch) / 16));
      CHECK(job.config.GetString("MODEL.RESNETS.NORM") == e.norm);
      const std::string fpn_norm = e.norm == "GN" ? "GN" : "";
      const std::string head_norm = e.norm == "GN" ? "GN" : e.head_norm;
      CHECK(job.config.GetString("MODEL.FPN.NORM") == fpn_norm);
      CHECK(job.config.GetString("MODEL.ROI_BOX_HEAD.NORM") == head_norm);
      CHECK(job.config.GetString("MODEL.ROI_MASK_HEAD.NORM") == head_norm);
      CHECK(job.config.GetInt("MODEL.ROI_BOX_HEAD.NUM_CONV") == (head_norm == "GN" ? 4 : 0));
      CHECK(job.config.GetInt("MODEL.ROI_BOX_HEAD.NUM_FC") == (head_norm == "GN" ? 1 : 2));
      CHECK(job.config.GetBoolList("MODEL.RESNETS.DEFORM_ON_PER_STAGE") ==
            std::vector<bool>{false, e.deform, e.deform, e.deform});
      CHECK(job.config.GetInt("MODEL.BACKBONE.TRAINABLE_LAYERS") == (e.scratch ? 5 : 3));
      CHECK(job.config.GetBool("MODEL.ROI_MASK_HEAD.CLS_AGNOSTIC_MASK") == e.cls_agnostic);
      for (const char* pooler : {"MODEL.ROI_BOX_HEAD.POOLER_TYPE", "MODEL.ROI_MASK_HEAD.POOLER_TYPE"}) {
        if (e.detectron1 && (e.mask || std::string(pooler).find("BOX") != std::string::npos))
          CHECK(job.config.GetString(pooler) == "ROIAlign");
      }
      if (e.detectron1) {
        CHECK(job.config.GetFloat("MODEL.RPN.SMOOTH_L1_BETA") == 0.1111);
        CHECK(job.config.GetFloat("MODEL.ROI_BOX_HEAD.SMOOTH_L1_BETA") == 1.0);
        CHECK(job.config.GetInt("MODEL.ROI_BOX_HEAD.POOLER_SAMPLING_RATIO") == 2);
      }
      CHECK(job.config.GetString("MODEL.ROI_BOX_HEAD.BBOX_REG_LOSS_TYPE") == e.box_loss);
      CHECK(job.config.GetString("MODEL.RPN.BBOX_REG_LOSS_TYPE") == e.box_loss);
      if (!e.scratch)
        CHECK(job.weights == t.root / "ml/input/data/weights/R-50.pkl");
      // Cascade R-CNN: Detectron2's class-agnostic stages and its 2000 training proposals.
      const bool cascade = e.roi_heads == "CascadeROIHeads";
      CHECK(job.config.GetBool("MODEL.ROI_BOX_HEAD.CLS_AGNOSTIC_BBOX_REG") == (cascade || e.cls_agnostic));
      if (cascade)
        CHECK(job.config.GetInt("MODEL.RPN.POST_NMS_TOPK_TRAIN") == 2000);
      CHECK(job.config.GetFloatList("MODEL.ROI_BOX_CASCADE_HEAD.IOUS") ==
            std::vector<double>{0.5, 0.6, 0.7});
    }
  }
  CHECK_FALSE(ModelZooConfig("my_config.yaml").has_value());
  CHECK_FALSE(ModelZooConfig("mask_rcnn_R_50_FPN_3x.yaml").has_value());

  // A file of that name in the configs dir is the user's own and wins.
  t.Write("configs/COCO-InstanceSegmentation/mask_rcnn_R_50_FPN_3x.yaml",
          "SOLVER: {MAX_ITER: 7}\n");
  TrainJobArgs own;
  own.config_file = "COCO-InstanceSegmentation/mask_rcnn_R_50_FPN_3x.yaml";
  CHECK(ResolveTrainJob(own, t.Env(), "").config.GetInt("SOLVER.MAX_ITER") == 7);
}

TEST_CASE("a zoo config's detectron2:// weights without a weights channel are fetched into the cache",
          "[job][model-zoo][download]") {
  JobTree t;
  EnvMap env = t.Env();
  env["MRCNN_CONFIG_DIR"] = std::string(MRCNN_SOURCE_DIR) + "/configs";
  TrainJobArgs args;
  args.config_file = "COCO-InstanceSegmentation/mask_rcnn_R_101_C4_3x.yaml";
  const fs::path cached = t.root / "ml/checkpoints/weights_cache/dl.fbaipublicfiles.com/detectron2/"
                                   "ImageNetPretrained/MSRA/R-101.pkl";
  TrainJob job = ResolveTrainJob(args, env, "");
  CHECK(job.weights == cached);
  CHECK(job.weights_url == "https://dl.fbaipublicfiles.com/detectron2/ImageNetPretrained/MSRA/R-101.pkl");
  CHECK_FALSE(fs::exists(cached));  // resolving downloads nothing; FetchJobWeights does

  // The mirror changes where it comes from, not where it is kept.
  env["MRCNN_ZOO_MIRROR"] = "s3://my-bucket/zoo";
  job = ResolveTrainJob(args, env, "");
  CHECK(job.weights == cached);
  CHECK(job.weights_url == "s3://my-bucket/zoo/detectron2/ImageNetPretrained/MSRA/R-101.pkl");
  env["MRCNN_WEIGHTS_CACHE"] = (t.root / "cache").string();
  CHECK(ResolveTrainJob(args, env, "").weights ==
        t.root / "cache/dl.fbaipublicfiles.com/detectron2/ImageNetPretrained/MSRA/R-101.pkl");

  // The weights channel comes first: the file of the URL's name among several, else its only one.
  t.Write("ml/input/data/weights/other.pth", "x");
  t.Write("ml/input/data/weights/R-101.pkl", "x");
  job = ResolveTrainJob(args, env, "");
  CHECK(job.weights == t.root / "ml/input/data/weights/R-101.pkl");
  CHECK(job.weights_url.empty());
  fs::remove(t.root / "ml/input/data/weights/R-101.pkl");
  CHECK(ResolveTrainJob(args, env, "").weights == t.root / "ml/input/data/weights/other.pth");
  t.Write("ml/input/data/weights/third.pth", "x");
  CHECK(ResolveTrainJob(args, env, "").weights_url ==
        "s3://my-bucket/zoo/detectron2/ImageNetPretrained/MSRA/R-101.pkl");
}

TEST_CASE("MODEL.WEIGHTS URLs that cannot be fetched are refused naming the key and the fix",
          "[job][download]") {
  JobTree t;
  TrainJobArgs args;
  args.opts = "MODEL.WEIGHTS catalog://ImageNetPretrained/FAIR/R-18";
  const std::string unknown = ErrorOf([&] { ResolveTrainJob(args, t.Env(), ""); });
  CHECK_THAT(unknown, Catch::Contains("MODEL.WEIGHTS") &&
                          Catch::Contains("catalog://ImageNetPretrained/MSRA/R-50") &&
                          Catch::Contains("weights channel"));
  args.opts = "MODEL.WEIGHTS gs://bucket/R-50.pkl";
  CHECK_THAT(ErrorOf([&] { ResolveTrainJob(args, t.Env(), ""); }),
             Catch::Contains("MODEL.WEIGHTS") && Catch::Contains("gs://"));
  args.opts = "MODEL.WEIGHTS catalog://ImageNetPretrained/FAIR/R-50-GN";
  CHECK(ResolveTrainJob(args, t.Env(), "").weights_url ==
        "https://dl.fbaipublicfiles.com/detectron/ImageNetPretrained/47261647/R-50-GN.pkl");
}

TEST_CASE("model-zoo names we cannot honour are refused with the reason and the supported names",
          "[job][model-zoo]") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"Misc/mask_rcnn_R_50_FPN_3x_syncbn.yaml", "PRECISE_BN"},
      {"Misc/panoptic_fpn_R_101_dconv_cascade_gn_3x.yaml", "panoptic"},
      {"Misc/cascade_mask_rcnn_X_152_32x8d_FPN_IN5k_gn_dconv.yaml", "golden test"},
      {"COCO-InstanceSegmentation/mask_rcnn_regnetx_4gf_dds_fpn_1x.py", "RegNet"},
      {"COCO-Detection/retinanet_R_50_FPN_1x.py", "LazyConfig"},
      {"COCO-Detection/rpn_R_50_FPN_1x.yaml", "proposal-only"},
      {"COCO-PanopticSegmentation/panoptic_fpn_R_50_3x.yaml", "panoptic"},
      {"LVISv1-InstanceSegmentation/mask_rcnn_R_50_FPN_1x.yaml", "LVIS"},
      {"Cityscapes/mask_rcnn_R_50_FPN.yaml", "Cityscapes"},
      {"Misc/scratch_mask_rcnn_R_50_FPN_9x_syncbn.yaml", "PRECISE_BN"},
      {"detectron2://Misc/mask_rcnn_R_50_FPN_3x_syncbn.yaml", "PRECISE_BN"}};
  JobTree t;
  for (const auto& [name, reason] : cases) {
    INFO(name);
    TrainJobArgs args;
    args.config_file = name;
    const std::string err = ErrorOf([&] { ResolveTrainJob(args, t.Env(), ""); });
    CHECK_THAT(err, Catch::StartsWith("hyperparameters: \"config-file\""));
    CHECK_THAT(err, Catch::Contains("cannot honour") && Catch::Contains(reason));
    CHECK_THAT(err, Catch::Contains("COCO-InstanceSegmentation/mask_rcnn_R_50_FPN_1x.yaml, "
                                    "COCO-InstanceSegmentation/mask_rcnn_R_50_FPN_3x.yaml"));
  }
}
