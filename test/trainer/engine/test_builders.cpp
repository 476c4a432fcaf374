// Each builder of the training job, called alone on a tiny config: what it builds and the
// error it gives for a bad key.
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>

#include "test/trainer/engine/temp_dir.h"
#include "trainer/data/data_loader.h"
#include "trainer/data/synthetic_shapes.h"
#include "trainer/engine/builders.h"
#include "trainer/engine/cuda_graphs/cuda_graphed_feature_stage.h"
#include "trainer/engine/solver/novograd.h"
#include "trainer/engine/solver/sgd.h"
#include "trainer/model/safetensors.h"

using namespace mrcnn::engine;
using mrcnn::test::TempDir;
namespace fs = std::filesystem;

namespace {

TrainConfig TinyConfig() {
  TrainConfig c = TrainConfig::Defaults();
  c.MergeOpts({"MODEL.DEVICE",
               "cpu",
               "MODEL.BACKBONE.NAME",
               "resnet18",
               "MODEL.BACKBONE.NORM",
               "GN",
               "MODEL.BACKBONE.TRAINABLE_LAYERS",
               "5",
               "MODEL.FPN.OUT_CHANNELS",
               "32",
               "MODEL.ROI_BOX_HEAD.FC_DIM",
               "64",
               "MODEL.ROI_MASK_HEAD.CONV_DIM",
               "32",
               "MODEL.ROI_HEADS.NUM_CLASSES",
               "3",
               "INPUT.MIN_SIZE_TRAIN",
               "[64]",
               "INPUT.MAX_SIZE_TRAIN",
               "64",
               "SOLVER.IMS_PER_BATCH",
               "4",
               "DATALOADER.NUM_WORKERS",
               "1"});
  return c;
}

}  // namespace

TEST_CASE("BuildDevice: cpu, and a clear error for anything else unavailable", "[builders]") {
  TrainConfig c = TinyConfig();
  CHECK(BuildDevice(c, 0).is_cpu());
  c.MergeOpts({"MODEL.DEVICE", "gpu"});
  CHECK_THROWS_WITH(BuildDevice(c, 0),
                    Catch::Contains("MODEL.DEVICE") && Catch::Contains("auto, cpu or cuda"));
  if (!torch::cuda::is_available()) {
    c.MergeOpts({"MODEL.DEVICE", "cuda"});
    CHECK_THROWS_WITH(BuildDevice(c, 0), Catch::Contains("no CUDA device"));
    c.MergeOpts({"MODEL.DEVICE", "auto"});
    CHECK(BuildDevice(c, 3).is_cpu());
  }
}

TEST_CASE("BuildStepPlan splits the global batch over processes and accumulation", "[builders]") {
  TrainConfig c = TinyConfig();
  c.MergeOpts(
      {"SOLVER.IMS_PER_BATCH", "16", "SOLVER.ACCUMULATION_STEPS", "2", "SOLVER.MAX_ITER", "7"});
  const StepPlan p = BuildStepPlan(c, 2);
  CHECK(p.micro_batch == 4);
  CHECK(p.accumulation == 2);
  CHECK(p.images_per_iteration == 16);
  CHECK(p.max_iter == 7);
  CHECK_THROWS_WITH(BuildStepPlan(c, 3),
                    Catch::Contains("SOLVER.IMS_PER_BATCH") && Catch::Contains("(16)"));
  c.MergeOpts({"SOLVER.ACCUMULATION_STEPS", "0"});
  CHECK_THROWS_WITH(BuildStepPlan(c, 1), Catch::Contains("SOLVER.ACCUMULATION_STEPS"));
}

TEST_CASE("BuildOptimizer by SOLVER.OPTIMIZER, any case, unknown names list the known ones",
          "[builders]") {
  NamedParameters params = {{"fc.weight", torch::ones({2, 2}).requires_grad_()},
                            {"fc.bias", torch::zeros({2}).requires_grad_()},
                            {"frozen", torch::zeros({2})}};
  TrainConfig c = TinyConfig();
  auto sgd = BuildOptimizer(c, params);
  CHECK(dynamic_cast<Sgd*>(sgd.get()) != nullptr);
  CHECK(sgd->Parameters().size() == 2);
  c.MergeOpts({"SOLVER.OPTIMIZER", "sgd"});
  CHECK(dynamic_cast<Sgd*>(BuildOptimizer(c, params).get()) != nullptr);
  c.MergeOpts({"SOLVER.OPTIMIZER", "Adam"});
  CHECK_THROWS_WITH(BuildOptimizer(c, params),
                    Catch::Contains("SOLVER.OPTIMIZER") && Catch::Contains("SGD"));
  CHECK(OptimizerNames() == std::vector<std::string>{"SGD", "NovoGrad"});
  c.MergeOpts({"SOLVER.OPTIMIZER", "novograd"});
  CHECK(dynamic_cast<NovoGrad*>(BuildOptimizer(c, params).get()) != nullptr);
  c.MergeOpts({"SOLVER.BETAS", "[0.9, 1.0]"});
  CHECK_THROWS_WITH(BuildOptimizer(c, params), Catch::Contains("SOLVER.BETAS"));
}

TEST_CASE("BuildLrSchedule, BuildGradScaler, BuildTrainStepOptions", "[builders]") {
  TrainConfig c = TinyConfig();
  c.MergeOpts({"SOLVER.LR_SCHEDULER_NAME", "WarmupCosineLR", "SOLVER.MAX_ITER", "100",
               "SOLVER.WARMUP_ITERS", "0", "SOLVER.BASE_LR", "0.1"});
  CHECK(BuildLrSchedule(c).LrAt(50) == Approx(0.05));
  c.MergeOpts({"SOLVER.AMP.ENABLED", "true"});
  const c10::Device cpu(c10::kCPU);
  CHECK_FALSE(BuildGradScaler(c, cpu).enabled());  // float16 config: fp32 on a CPU
  CHECK_FALSE(BuildAmpDtype(c, cpu).has_value());
  const c10::Device cuda(c10::kCUDA, 0);  // only a value here: nothing runs on it
  CHECK(BuildAmpDtype(c, cuda) == at::kHalf);
  CHECK(BuildGradScaler(c, cuda).enabled());
  c.MergeOpts({"SOLVER.AMP.DTYPE", "fp8"});
  CHECK_THROWS_WITH(BuildAmpDtype(c, cpu), Catch::Contains("SOLVER.AMP.DTYPE"));
  c.MergeOpts({"SOLVER.AMP.DTYPE", "bfloat16", "SOLVER.CLIP_GRADIENTS.ENABLED", "true",
               "SOLVER.CLIP_GRADIENTS.CLIP_VALUE", "5.0"});
  const TrainStepOptions o = BuildTrainStepOptions(c, cpu);
  CHECK(o.clip);
  CHECK(o.clip_value == 5.0);
  CHECK(o.amp_dtype == at::kBFloat16);  // bfloat16 autocast on a CPU
  CHECK(o.amp_device_type == c10::DeviceType::CPU);
  CHECK_FALSE(BuildGradScaler(c, cpu).enabled());  // bfloat16 needs no loss scaling
  CHECK(BuildTrainStepOptions(c, cuda).amp_device_type == c10::DeviceType::CUDA);
  c.MergeOpts({"SOLVER.AMP.ENABLED", "false"});
  CHECK_FALSE(BuildTrainStepOptions(c, cpu).amp_dtype.has_value());
  c.MergeOpts({"SOLVER.CLIP_GRADIENTS.CLIP_TYPE", "global"});
  CHECK_THROWS_WITH(BuildTrainStepOptions(c, cpu),
                    Catch::Contains("SOLVER.CLIP_GRADIENTS.CLIP_TYPE"));
}

TEST_CASE("SOLVER.CUDA_GRAPHS: shapes validated, refused on a CPU, passed to the step on CUDA",
          "[builders]") {
  TrainConfig c = TinyConfig();
  const c10::Device cpu(c10::kCPU);
  CHECK(BuildTrainStepOptions(c, cpu).graph_shapes.empty());  // off by default
  const auto defaults = BuildGraphShapes(c);
  REQUIRE(defaults.size() == 2);
  CHECK((defaults[0] == std::array<int64_t, 2>{800, 1344}));
  CHECK((defaults[1] == std::array<int64_t, 2>{1344, 800}));
  c.MergeOpts({"SOLVER.CUDA_GRAPHS.ENABLED", "true"});
  CHECK_THROWS_WITH(BuildTrainStepOptions(c, cpu), Catch::Contains("SOLVER.CUDA_GRAPHS.ENABLED") &&
                                                       Catch::Contains("needs CUDA") &&
                                                       Catch::Contains("set it to false"));
  const c10::Device cuda(c10::kCUDA, 0);  // only a value here: nothing runs on it
  if (CudaGraphsCompiled()) {
    const TrainStepOptions o = BuildTrainStepOptions(c, cuda, 4);
    CHECK((o.graph_shapes == defaults));
    CHECK(o.graph_batch == 4);
  } else {
    CHECK_THROWS_WITH(BuildTrainStepOptions(c, cuda), Catch::Contains("MRCNN_CUDA=OFF"));
  }
  c.MergeOpts({"SOLVER.CUDA_GRAPHS.SHAPES", "[[800, 1333]]"});
  CHECK_THROWS_WITH(BuildGraphShapes(c), Catch::Contains("SOLVER.CUDA_GRAPHS.SHAPES") &&
                                             Catch::Contains("INPUT.SIZE_DIVISIBILITY"));
  c.MergeOpts({"SOLVER.CUDA_GRAPHS.SHAPES", "[[800]]"});
  CHECK_THROWS_WITH(BuildGraphShapes(c), Catch::Contains("[height, width]"));
  c.MergeOpts({"SOLVER.CUDA_GRAPHS.SHAPES", "[[800.5, 1344]]"});
  CHECK_THROWS_WITH(BuildGraphShapes(c), Catch::Contains("[height, width]"));
}

TEST_CASE("BuildModel: seeded initialisation, MODEL.WEIGHTS loaded by name or refused",
          "[builders]") {
  TempDir tmp;
  fs::create_directories(tmp.path);
  const auto mc = BuildModelConfig(TinyConfig());
  const ConsoleLog quiet(false);
  torch::manual_seed(3);
  auto a = BuildModel(mc, c10::Device(c10::kCPU), std::nullopt, quiet);
  torch::manual_seed(3);
  auto b = BuildModel(mc, c10::Device(c10::kCPU), std::nullopt, quiet);
  const auto pa = ParametersOf(*a);
  REQUIRE(!pa.empty());
  CHECK(torch::equal(pa.front().second, ParametersOf(*b).front().second));

  mrcnn::model::TensorMap one = {{pa.front().first, torch::full_like(pa.front().second, 0.5)}};
  mrcnn::model::WriteSafetensors(tmp.path / "part.safetensors", one);
  auto c = BuildModel(mc, c10::Device(c10::kCPU), tmp.path / "part.safetensors", quiet);
  CHECK(torch::all(ParametersOf(*c).front().second == 0.5).item<bool>());

  // What was loaded, skipped and left at initialisation, by name, and the log lines.
  const auto& [second_name, second] = pa[1];
  mrcnn::model::WriteSafetensors(tmp.path / "mixed.safetensors",
                                 {{pa.front().first, torch::full_like(pa.front().second, 0.25)},
                                  {second_name, torch::zeros({second.numel() + 1})},
                                  {"fc.weight", torch::zeros({3, 2})},
                                  {"fc.bias", torch::zeros({3})}});
  auto d = BuildModel(mc, c10::Device(c10::kCPU), std::nullopt, quiet);
  const WeightsLoad load = LoadWeightsByName(*d, tmp.path / "mixed.safetensors");
  CHECK(load.loaded == std::vector<std::string>{pa.front().first});
  CHECK(load.not_in_model == std::vector<std::string>{"fc.bias", "fc.weight"});
  REQUIRE(load.shape_differs.size() == 1);
  CHECK_THAT(load.shape_differs[0],
             Catch::StartsWith(second_name + ": file [" + std::to_string(second.numel() + 1) +
                               "] vs model ["));
  const size_t state_size = mrcnn::model::StateDict(*d).size();
  CHECK(load.left_initialised.size() == state_size - 2);
  CHECK(std::find(load.left_initialised.begin(), load.left_initialised.end(), second_name) ==
        load.left_initialised.end());
  const auto lines = DescribeWeightsLoad(load, tmp.path / "mixed.safetensors");
  REQUIRE(lines.size() == 4);
  CHECK_THAT(lines[0], Catch::StartsWith("[weights] loaded 1 of the model's " +
                                         std::to_string(state_size) + " tensors from "));
  CHECK_THAT(lines[1], Catch::StartsWith("[weights] left at initialisation (not in the file): " +
                                         std::to_string(state_size - 2) + " tensors: ") &&
                           Catch::Contains("roi_heads.box_predictor: 4"));
  CHECK_THAT(lines[2], Catch::Contains("skipped, shape differs") && Catch::Contains(second_name));
  CHECK(lines[3] == "[weights] skipped, not in the model: 2 tensors: fc.bias, fc.weight");

  mrcnn::model::WriteSafetensors(tmp.path / "other.safetensors",
                                 {{"unrelated", torch::zeros({1})}});
  CHECK_THROWS_WITH(BuildModel(mc, c10::Device(c10::kCPU), tmp.path / "other.safetensors", quiet),
                    Catch::Contains("MODEL.WEIGHTS") && Catch::Contains("convert_weights.py"));
}

TEST_CASE("BuildTrainData, BuildTestSource and BuildTrainLoader on a shapes dataset",
          "[builders]") {
  TempDir tmp;
  mrcnn::data::ShapesOptions so;
  so.output = tmp.path;
  so.train_images = 12;
  so.val_images = 2;
  so.image_size = 64;
  so.seed = 5;
  mrcnn::data::WriteShapesDataset(so);
  TrainJob job;
  job.config = TinyConfig();
  job.train_dir = tmp.path;
  job.train_channel = "train";
  const auto mc = BuildModelConfig(job.config);
  const TrainData train = BuildTrainData(job, mc, ConsoleLog(false));
  CHECK(train.dataset->images().size() == 12);
  CHECK_FALSE(BuildTestSource(job).has_value());
  job.test_dir = tmp.path;
  job.test_channel = "val";
  REQUIRE(BuildTestSource(job).has_value());
  CHECK(BuildTestSource(job)->layout.annotation_file.filename() == "instances_val.json");

  const StepPlan plan = BuildStepPlan(job.config, 1);
  auto fresh = BuildTrainLoader(job.config, mc, train, ProcessWorld{}, plan, 9, 0);
  std::vector<int64_t> third;
  for (int i = 0; i < 3; ++i) {
    auto batch = fresh->Next();
    REQUIRE(batch);
    CHECK(batch->image_ids.size() == 4);
    third = batch->image_ids;
  }
  auto resumed = BuildTrainLoader(job.config, mc, train, ProcessWorld{}, plan, 9, 2);
  CHECK(resumed->Next()->image_ids == third);  // positioned after the batches consumed

  job.config.MergeOpts({"MODEL.ROI_HEADS.NUM_CLASSES", "5"});
  CHECK_THROWS_WITH(
      BuildTrainData(job, BuildModelConfig(job.config), ConsoleLog(false)),
      Catch::Contains("MODEL.ROI_HEADS.NUM_CLASSES") && Catch::Contains("3 categories"));
  job.config.MergeOpts({"MODEL.ROI_HEADS.NUM_CLASSES", "3", "INPUT.RANDOM_FLIP", "vertical"});
  CHECK_THROWS_WITH(BuildTrainLoader(job.config, mc, train, ProcessWorld{}, plan, 9, 0),
                    Catch::Contains("INPUT.RANDOM_FLIP"));
}

TEST_CASE("BuildTrainLoader crops large images when INPUT.CROP is on", "[builders][crop]") {
  TempDir tmp;
  mrcnn::data::ShapesOptions so;
  so.output = tmp.path;
  so.train_images = 4;
  so.val_images = 0;
  so.canvas_width = 320;
  so.canvas_height = 240;
  so.objects = 30;
  so.seed = 2;
  mrcnn::data::WriteShapesDataset(so);
  TrainJob job;
  job.config = TinyConfig();
  job.config.MergeOpts({"INPUT.MAX_SIZE_TRAIN", "1000"});
  job.train_dir = tmp.path;
  job.train_channel = "train";
  const auto mc = BuildModelConfig(job.config);
  const TrainData train = BuildTrainData(job, mc, ConsoleLog(false));
  const StepPlan plan = BuildStepPlan(job.config, 1);
  // Off: the whole 320x240 canvas shrunk to a 64 px shortest edge.
  auto whole = BuildTrainLoader(job.config, mc, train, ProcessWorld{}, plan, 3, 0)->Next();
  REQUIRE(whole);
  CHECK(whole->image_sizes[0] == std::array<int64_t, 2>{64, 85});
  // On: 64x96 windows at native resolution (the 64 px shortest edge keeps them as they are).
  job.config.MergeOpts(
      {"INPUT.CROP.ENABLED", "True", "INPUT.CROP.TYPE", "absolute", "INPUT.CROP.SIZE", "[64, 96]"});
  auto cropped = BuildTrainLoader(job.config, mc, train, ProcessWorld{}, plan, 3, 0)->Next();
  REQUIRE(cropped);
  REQUIRE(cropped->image_sizes.size() == 4);
  int64_t instances = 0;
  for (size_t i = 0; i < 4; ++i) {
    CHECK(cropped->image_sizes[i] == std::array<int64_t, 2>{64, 96});
    CHECK(cropped->original_sizes[i] == std::array<int64_t, 2>{64, 96});
    instances += cropped->targets[i].boxes.size(0);
  }
  CHECK(instances > 0);
}
