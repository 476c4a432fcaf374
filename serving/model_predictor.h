#pragma once
// The real detector: mrcnn::model::InferenceModel (trainer/model/inference.h) behind the
// serving Predictor interface. Built only when the model library is part of the build.
#include <filesystem>
#include <memory>
#include <string>

#include "serving/predictor.h"

namespace mrcnn::serving {

struct ModelPredictorOptions {
  std::string device = "cpu";      // "cpu", "cuda", "cuda:N"
  std::string precision = "fp32";  // "fp16" / "bf16" only on CUDA
  int num_threads = 0;             // 0 keeps torch's default intra-op thread count
};

// Loads model.safetensors + config.yaml + classes.json from model_dir. Throws naming the
// file or field that is wrong.
std::unique_ptr<Predictor> LoadModelPredictor(const std::filesystem::path& model_dir,
                                              const ModelPredictorOptions& options);

}  // namespace mrcnn::serving
