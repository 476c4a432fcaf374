#pragma once
// Every `period` iterations: per module group (e.g. "backbone.body.layer3",
// "roi_heads.box_head"), the L2 norm of its weights and of its gradients as scalars
// ("weights_norm/<group>", "grads_norm/<group>") and histograms of both ("weights/<group>",
// "grads/<group>") into the event store, for TensorBoard: what SageMakerCV's team looked
// at to find their learning-rate schedule. Gradients are read through TrainStep's probe,
// once final (averaged, unscaled, clipped) and before the update; those of a step skipped
// for an fp16 overflow are dropped. Rank 0 only.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "trainer/engine/solver/optimizer.h"
#include "trainer/engine/trainer_base.h"

namespace mrcnn::engine {

class TrainStep;

// "backbone.body.layer1.0.conv1.weight" -> "backbone.body.layer1"; other parameters keep
// their first two components ("rpn.head", "roi_heads.mask_head").
std::string ParameterGroup(const std::string& parameter_name);

// TensorBoard-style histogram of `values` (30 equal buckets between min and max).
HistogramEvent HistogramOf(const at::Tensor& values, const std::string& tag, int64_t iteration);

class ParameterHistogramsHook : public HookBase {
 public:
  // Installs its probe on `step`; both must outlive the trainer.
  ParameterHistogramsHook(int64_t period, const NamedParameters& parameters, TrainStep& step);
  void BeforeStep(TrainerBase& trainer) override;
  void AfterStep(TrainerBase& trainer) override;
  std::string name() const override { return "ParameterHistograms"; }

 private:
  int64_t period_;
  std::map<std::string, std::vector<at::Tensor>> groups_;  // group -> parameters
  bool armed_ = false;
  std::map<std::string, at::Tensor> gradients_;  // group -> flat gradient copy
  at::Tensor found_inf_;                         // the probed step's overflow flag, if any
};

}  // namespace mrcnn::engine
