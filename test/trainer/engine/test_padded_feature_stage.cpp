// The padding SOLVER.CUDA_GRAPHS applies (cuda_graphs/padded_feature_stage.h), checked on
// the CPU: the stage on a batch padded to a configured shape and to the full micro-batch,
// cut back to the real images, gives the losses and gradients of eager training on the
// same padded batch. The graphs themselves replay this padded stage (GPU check).
#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <vector>

#include "test/trainer/model/small_model_config.h"
#include "trainer/engine/builders.h"
#include "trainer/engine/cuda_graphs/padded_feature_stage.h"
#include "trainer/engine/solver/grad_scaler.h"
#include "trainer/engine/solver/sgd.h"
#include "trainer/engine/train_step.h"
#include "trainer/model/meta_arch/meta_arch.h"

namespace {

using mrcnn::engine::GradScaler;
using mrcnn::engine::Sgd;
using mrcnn::engine::SgdOptions;
using mrcnn::engine::TrainStep;
using mrcnn::engine::TrainStepOptions;

mrcnn::model::ModelConfig SmallConfig() {
  mrcnn::model::ModelConfig c = mrcnn::test::SmallModelConfig();
  // Every candidate fits its quota: sampling draws nothing at random.
  c.rpn_batch_size_per_image = 100000;
  c.box_batch_size_per_image = 100000;
  return c;
}

struct StepResult {
  at::Tensor losses;  // the micro-batch's losses, then their sum
  std::vector<at::Tensor> gradients;
  int64_t padded_runs = 0, eager_runs = 0;
};

// One forward/backward of `images` (N×3×H×W, padded as Transform pads) through a fresh
// copy of the same model.
StepResult RunStep(const at::Tensor& images, const std::vector<std::array<int64_t, 2>>& sizes,
                   const std::vector<mrcnn::model::ImageTarget>& targets,
                   std::vector<std::array<int64_t, 2>> graph_shapes, int64_t graph_batch) {
  torch::manual_seed(3);
  auto net = mrcnn::model::BuildModel(SmallConfig());
  net->train();
  net->set_fixed_mask_rows(true);
  Sgd sgd(mrcnn::engine::ParametersOf(*net), SgdOptions{});
  GradScaler scaler(false);
  TrainStepOptions options;
  options.graph_shapes = std::move(graph_shapes);
  options.graph_batch = graph_batch;
  options.graph_padding_only = true;
  TrainStep step(*net, sgd, scaler, nullptr, torch::kCPU, options);
  mrcnn::model::ImageBatch batch{images, sizes, sizes};
  const auto losses = step.ForwardBackward(batch, targets, {}, 1, 1);
  StepResult out{losses.values.clone(), {}};
  for (const at::Tensor& p : sgd.Parameters())
    out.gradients.push_back(p.grad().defined() ? p.grad().clone() : torch::zeros_like(p));
  if (step.feature_stage() != nullptr) {
    out.padded_runs = step.feature_stage()->padded_runs();
    out.eager_runs = step.feature_stage()->eager_runs();
  }
  return out;
}

mrcnn::model::ImageTarget Target(int64_t h, int64_t w, std::vector<float> box, int64_t label) {
  mrcnn::model::ImageTarget t;
  t.boxes = torch::tensor(box).view({1, 4});
  t.labels = torch::tensor({label});
  t.masks = torch::zeros({1, h, w}, torch::kUInt8);
  t.masks.index_put_(
      {0, torch::indexing::Slice(static_cast<int64_t>(box[1]), static_cast<int64_t>(box[3])),
       torch::indexing::Slice(static_cast<int64_t>(box[0]), static_cast<int64_t>(box[2]))},
      1);
  return t;
}

at::Tensor PadTo(const at::Tensor& images, int64_t h, int64_t w) {
  at::Tensor out = torch::zeros({images.size(0), images.size(1), h, w});
  out.narrow(2, 0, images.size(2)).narrow(3, 0, images.size(3)).copy_(images);
  return out;
}

}  // namespace

TEST_CASE(
    "CUDA-graph padding gives the losses and gradients of eager training on the same padded batch",
    "[cuda_graphs]") {
  torch::manual_seed(1);
  // Two images of 60×90 and 50×70, padded by Transform to 64×96.
  const at::Tensor images = PadTo(torch::rand({2, 3, 60, 90}), 64, 96);
  const std::vector<std::array<int64_t, 2>> sizes{{60, 90}, {50, 70}};
  const std::vector<mrcnn::model::ImageTarget> targets{Target(64, 96, {10, 8, 52, 40}, 1),
                                                       Target(64, 96, {20, 15, 60, 45}, 2)};
  // 64×64 is too narrow; 96×128 and 128×96 have the same area, the first listed wins.
  const std::vector<std::array<int64_t, 2>> shapes{{64, 64}, {96, 128}, {128, 96}};
  const StepResult padded = RunStep(images, sizes, targets, shapes, /*graph_batch=*/3);
  const StepResult eager = RunStep(PadTo(images, 96, 128), sizes, targets, {}, 0);
  CHECK(padded.padded_runs == 1);
  CHECK(padded.eager_runs == 0);
  INFO("padded losses " << padded.losses << "\neager losses " << eager.losses);
  CHECK(torch::allclose(padded.losses, eager.losses, 1e-4, 1e-5));
  REQUIRE(padded.gradients.size() == eager.gradients.size());
  for (size_t i = 0; i < padded.gradients.size(); ++i) {
    INFO("parameter " << i);
    CHECK(torch::allclose(padded.gradients[i], eager.gradients[i], 1e-3, 1e-5));
  }
  // The padding matters: unpadded (64×96) the anchors differ, and so do the losses.
  const StepResult unpadded = RunStep(images, sizes, targets, {}, 0);
  CHECK_FALSE(torch::allclose(unpadded.losses, eager.losses, 1e-4, 1e-5));
}

TEST_CASE("a batch no configured shape holds, or larger than the micro-batch, runs unpadded",
          "[cuda_graphs]") {
  torch::manual_seed(2);
  const at::Tensor images = torch::rand({1, 3, 64, 96});
  const std::vector<std::array<int64_t, 2>> sizes{{64, 96}};
  const std::vector<mrcnn::model::ImageTarget> targets{Target(64, 96, {10, 8, 52, 40}, 1)};
  const StepResult too_big = RunStep(images, sizes, targets, {{64, 64}}, 1);
  CHECK(too_big.padded_runs == 0);
  CHECK(too_big.eager_runs == 1);
  const StepResult eager = RunStep(images, sizes, targets, {}, 0);
  CHECK(torch::equal(too_big.losses, eager.losses));
  auto net = mrcnn::model::BuildModel(SmallConfig());
  mrcnn::engine::PaddedFeatureStage stage(*net, {{64, 64}, {96, 128}, {128, 96}, {128, 128}}, 2);
  CHECK(stage.PickShape(64, 96) == std::optional<size_t>(1));
  CHECK(stage.PickShape(100, 96) == std::optional<size_t>(2));
  CHECK(stage.PickShape(100, 100) == std::optional<size_t>(3));
  CHECK(stage.PickShape(32, 32) == std::optional<size_t>(0));
  CHECK_FALSE(stage.PickShape(129, 32).has_value());
}
