// MaskRcnnTrainer with fp16's dynamic loss scaling, on a CPU (autocast off, the scaler on):
// the trainer's own loop over the synthetic shapes, with a first loss scale so large that
// the first step must overflow. The overflow check, the skip and the scale update run on
// the device (nothing is read back between logging iterations), so what this checks is
// what the host sees afterwards: the parameters did not move at the skipped step and did
// at the next, and "amp/loss_scale" was logged for every iteration, with the values the
// scaler's rule gives, read with the losses at the logging iterations.
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "test/trainer/engine/temp_dir.h"
#include "test/trainer/model/small_model_config.h"
#include "trainer/data/coco_dataset.h"
#include "trainer/data/data_loader.h"
#include "trainer/data/synthetic_shapes.h"
#include "trainer/engine/builders.h"
#include "trainer/engine/events/train_window.h"
#include "trainer/engine/mask_rcnn_trainer.h"
#include "trainer/engine/model_inputs.h"
#include "trainer/engine/solver/grad_scaler.h"
#include "trainer/engine/solver/sgd.h"
#include "trainer/engine/train_step.h"
#include "trainer/model/meta_arch/meta_arch.h"

using namespace mrcnn;

namespace {

// The first trainable parameter's values after every iteration.
class ParameterTrace : public engine::HookBase {
 public:
  explicit ParameterTrace(at::Tensor p) : p_(std::move(p)) {}
  void AfterStep(engine::TrainerBase&) override { after_.push_back(p_.detach().clone()); }
  std::string name() const override { return "ParameterTrace"; }
  const std::vector<at::Tensor>& after() const { return after_; }

 private:
  at::Tensor p_;
  std::vector<at::Tensor> after_;
};

// The trainer's loop over 6 synthetic shapes images (2 per batch) with a small model and
// loss scaling on a CPU. Box-regression losses weighted 2^20 give gradients of 10^4 and
// more (a tiny lr keeps the run stable), which a first scale of 2^127 takes past float32's
// range: the first step overflows for certain.
struct LossScaledRun {
  test::TempDir dir{"loss_scaled_training_"};
  std::unique_ptr<data::DataLoader> loader;
  std::shared_ptr<model::MetaArchitecture> net;
  std::unique_ptr<engine::Sgd> sgd;
  std::unique_ptr<engine::GradScaler> scaler;
  std::unique_ptr<engine::TrainStep> step;
  std::unique_ptr<engine::TrainingState> state;
  std::unique_ptr<engine::MaskRcnnTrainer> trainer;
  std::vector<double> flags;  // the overflow flag the step hands its gradient probe
  ParameterTrace* trace = nullptr;
  at::Tensor initial;

  LossScaledRun(double backoff, int64_t growth_interval) {
    data::ShapesOptions shapes;
    shapes.output = dir.path;
    shapes.train_images = 6;
    shapes.val_images = 1;
    shapes.image_size = 96;
    shapes.max_objects = 2;
    data::WriteShapesDataset(shapes);
    auto dataset = std::make_shared<const data::CocoDataset>(
        data::CocoDataset::Load(dir.path / "annotations" / "instances_train.json"));
    torch::manual_seed(5);
    model::ModelConfig mc = test::SmallModelConfig();
    mc.bbox_reg_loss_weight = mc.rpn_bbox_reg_loss_weight = std::ldexp(1.0, 20);
    net = model::BuildModel(mc);
    net->train();
    data::LoaderOptions lo;
    lo.image_root = dir.path / "train";
    lo.batch_size = 2;
    lo.num_workers = 1;
    lo.transform.min_sizes = {96};
    lo.transform.max_size = 96;
    lo.transform.training = true;
    lo.normalization = engine::NormalizationOf(mc);
    lo.size_divisibility = mc.size_divisibility;
    loader = std::make_unique<data::DataLoader>(dataset, lo);
    sgd = std::make_unique<engine::Sgd>(engine::ParametersOf(*net), engine::SgdOptions{});
    sgd->set_lr(1e-9);
    scaler = std::make_unique<engine::GradScaler>(true, std::ldexp(1.0, 127), 2.0, backoff,
                                                  growth_interval);
    engine::TrainStepOptions options;
    options.nonfinite_advice = "lower SOLVER.BASE_LR";
    step = std::make_unique<engine::TrainStep>(*net, *sgd, *scaler, nullptr, torch::kCPU, options);
    step->set_gradient_probe([this](const std::vector<at::Tensor>&, const at::Tensor& found_inf) {
      flags.push_back(found_inf.item<double>());
    });
    state =
        std::make_unique<engine::TrainingState>(engine::TrainingState{*net, *sgd, *scaler, 0, 0});
    trainer = std::make_unique<engine::MaskRcnnTrainer>(engine::EventStorage(), *step, *loader,
                                                        *state, torch::kCPU,
                                                        /*accumulation=*/1, /*read_period=*/2);
    const at::Tensor watched = sgd->Parameters().front();
    initial = watched.detach().clone();
    auto hook = std::make_unique<ParameterTrace>(watched);
    trace = hook.get();
    std::vector<std::unique_ptr<engine::HookBase>> hooks;
    hooks.push_back(std::move(hook));
    trainer->RegisterHooks(std::move(hooks));
  }
};

}  // namespace

TEST_CASE("loss-scaled training skips an overflowed step on the device and logs the scale",
          "[engine][amp]") {
  // The backoff brings the scale to 2^67 at once, where the gradients fit; then it doubles
  // after every 2 good steps.
  LossScaledRun run(std::ldexp(1.0, -60), 2);
  run.trainer->Train(0, 5);

  const engine::EventStorage& s = run.trainer->storage();
  CHECK(run.flags == std::vector<double>{1, 0, 0, 0, 0});
  REQUIRE(s.Has("amp/loss_scale"));
  const auto& logged = s.History("amp/loss_scale");
  const std::vector<double> want = {std::ldexp(1.0, 67), std::ldexp(1.0, 67), std::ldexp(1.0, 68),
                                    std::ldexp(1.0, 68), std::ldexp(1.0, 69)};
  for (int64_t it = 0; it < 5; ++it) {
    INFO("iteration " << it);
    CHECK(logged.At(it) == want[static_cast<size_t>(it)]);
    CHECK(std::isfinite(s.History("total_loss").At(it)));
  }
  const std::vector<at::Tensor>& after = run.trace->after();
  REQUIRE(after.size() == 5);
  CHECK(torch::equal(after[0], run.initial));        // skipped
  CHECK_FALSE(torch::equal(after[1], run.initial));  // applied
  CHECK_FALSE(torch::equal(after[2], after[1]));
  CHECK(torch::isfinite(after.back()).all().item<bool>());
  CHECK(run.scaler->scale() == std::ldexp(1.0, 69));
  CHECK(run.scaler->growth_tracker() == 0);
  // The writers' window (console line, metrics.jsonl) carries the newest scale.
  const engine::TrainLogEntry entry = engine::TrainWindowEntry(s, 2, {5, 2});
  REQUIRE(entry.loss_scale.has_value());
  CHECK(*entry.loss_scale == std::ldexp(1.0, 69));
}

// A scale that fell below TrainStep::kMinLossScale means the steps keep overflowing: the
// job stops at the next read, naming the iteration, rather than skipping every step.
TEST_CASE("loss-scaled training stops when the scale falls below the minimum", "[engine][amp]") {
  // One overflow takes 2^127 to 2^-73.
  LossScaledRun run(std::ldexp(1.0, -200), 2000);
  CHECK_THROWS_WITH(run.trainer->Train(0, 5), Catch::Contains("fp16 loss scale fell to") &&
                                                  Catch::Contains("at iteration 1 ") &&
                                                  Catch::Contains("lower SOLVER.BASE_LR"));
  // Stopped at the first read, at the end of the second iteration's step (its hooks did not
  // run).
  CHECK(run.trace->after().size() == 1);
  CHECK(torch::equal(run.trace->after()[0], run.initial));
}
