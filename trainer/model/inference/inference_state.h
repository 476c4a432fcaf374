#pragma once
// What an InferenceModel holds, shared by the untiled path (inference.cpp) and tiled
// inference (tiled_prediction.cpp). Internal to trainer/model.
#include <torch/torch.h>

#include <string>
#include <vector>

#include "trainer/model/backbone/fast_conv.h"
#include "trainer/model/inference/inference.h"
#include "trainer/model/inference/model_input.h"
#include "trainer/model/meta_arch/meta_arch.h"

namespace mrcnn::model {

struct InferenceModel::State {
  std::shared_ptr<MetaArchitecture> model;
  torch::Device device{torch::kCPU};
  at::ScalarType autocast_dtype = at::kFloat;   // kFloat: no autocast (CUDA fp16/bf16)
  CpuDenseMode cpu_mode = CpuDenseMode::kFp32;  // the CPU fast path's (CpuPrecisionScope)
  std::string precision = "fp32";               // resolved: fp32, fp32-fast, fp16 or bf16
  std::vector<std::string> names;
  std::vector<int64_t> category_ids;

  // The model's detections for inputs made by AddModelInput (on `device`), in their output
  // sizes, under the configured precision, with the detection settings already set by the
  // caller.
  std::vector<ImageResult> Forward(const ModelInputs& inputs);

  // A Detection with everything but the mask filled from label (1..K), box and score.
  Detection Describe(int64_t label, const std::array<float, 4>& box, float score) const;
};

// The precision a requested one ("auto", "fp32", "fp32-fast", "fp16", "bf16") resolves to on a
// CPU or CUDA device: auto is bf16 on a CPU with native bf16 dot products, fp32-fast on other
// CPUs, fp32 on CUDA. Throws std::runtime_error naming the option for an unknown name, fp16
// on CPU or fp32-fast on CUDA.
std::string ResolvePrecision(const std::string& requested, bool cuda);

}  // namespace mrcnn::model
