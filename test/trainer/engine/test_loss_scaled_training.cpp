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
#include "trainer/engine/mask_rcnn_trainer.h"
#include "trainer/engine/model_inputs.h"
#include "trainer/engine/solver/grad_scaler.h"
#include "trainer/engine/solver/sgd.h"
#include "trainer/engine/train_step.h"
#include "trainer/model/mask_rcnn.h"

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

}  // namespace

TEST_CASE("loss-scaled training skips an overflowed step on the device and logs the scale",
          "[engine][amp]") {
  test::TempDir dir("loss_scaled_training_");
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
  model::MaskRcnn net(mc);
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
  data::DataLoader loader(dataset, lo);

  engine::Sgd sgd(engine::ParametersOf(*net), engine::SgdOptions{});
  sgd.set_lr(1e-9);
  // Box-regression losses weighted 2^20 give gradients of 10^4 and more (a tiny lr keeps
  // the run stable), which a scale of 2^127 takes past float32's range: the first step
  // overflows for certain. The backoff brings the scale to 2^67 at once, where they fit;
  // then it doubles after every 2 good steps.
  const double first_scale = std::ldexp(1.0, 127);
  engine::GradScaler scaler(true, first_scale, 2.0, std::ldexp(1.0, -60), 2);
  engine::TrainStep step(*net, sgd, scaler, nullptr, torch::kCPU, engine::TrainStepOptions{});
  // The flag the step hands its gradient probe (ParameterHistogramsHook's way in).
  std::vector<double> flags;
  step.set_gradient_probe([&flags](const std::vector<at::Tensor>&, const at::Tensor& found_inf) {
    flags.push_back(found_inf.item<double>());
  });
  engine::TrainingState state{*net, sgd, scaler, 0, 0};
  engine::MaskRcnnTrainer trainer(engine::EventStorage(), step, loader, state, torch::kCPU,
                                  /*accumulation=*/1, /*read_period=*/2);
  const at::Tensor watched = sgd.Parameters().front();
  const at::Tensor initial = watched.detach().clone();
  auto trace = std::make_unique<ParameterTrace>(watched);
  ParameterTrace& seen = *trace;
  std::vector<std::unique_ptr<engine::HookBase>> hooks;
  hooks.push_back(std::move(trace));
  trainer.RegisterHooks(std::move(hooks));
  trainer.Train(0, 5);

  const engine::EventStorage& s = trainer.storage();
  CHECK(flags == std::vector<double>{1, 0, 0, 0, 0});
  REQUIRE(s.Has("amp/loss_scale"));
  const auto& logged = s.History("amp/loss_scale");
  const std::vector<double> want = {std::ldexp(1.0, 67), std::ldexp(1.0, 67), std::ldexp(1.0, 68),
                                    std::ldexp(1.0, 68), std::ldexp(1.0, 69)};
  for (int64_t it = 0; it < 5; ++it) {
    INFO("iteration " << it);
    CHECK(logged.At(it) == want[static_cast<size_t>(it)]);
    CHECK(std::isfinite(s.History("total_loss").At(it)));
  }
  REQUIRE(seen.after().size() == 5);
  CHECK(torch::equal(seen.after()[0], initial));        // skipped
  CHECK_FALSE(torch::equal(seen.after()[1], initial));  // applied
  CHECK_FALSE(torch::equal(seen.after()[2], seen.after()[1]));
  CHECK(torch::isfinite(seen.after().back()).all().item<bool>());
  CHECK(scaler.scale() == std::ldexp(1.0, 69));
  CHECK(scaler.growth_tracker() == 0);
}
