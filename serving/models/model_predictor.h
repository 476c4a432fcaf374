#pragma once
// The real detector: mrcnn::model::InferenceModel (trainer/model/inference/inference.h) behind the
// serving Predictor interface. Built only when the model library is part of the build.
#include <filesystem>
#include <memory>
#include <string>

#include "serving/models/core_share.h"
#include "serving/models/predictor.h"

namespace mrcnn::serving {

struct ModelPredictorOptions {
  std::string device = "cpu";      // "cpu", "cuda", "cuda:N"
  std::string precision = "auto";  // auto, fp32, bf16; fp16 only on CUDA (InferenceOptions)
  int num_threads = 0;             // 0 keeps torch's default intra-op thread count
  // When set (the model on a CPU), every Predict follows it op by op instead of num_threads,
  // which then holds only for loading and warm-up. Must outlive the predictor.
  const CoreShare* core_share = nullptr;
};

// Loads model.safetensors + config.yaml + classes.json from model_dir. Throws naming the
// file or field that is wrong.
std::unique_ptr<Predictor> LoadModelPredictor(const std::filesystem::path& model_dir,
                                              const ModelPredictorOptions& options);

}  // namespace mrcnn::serving
