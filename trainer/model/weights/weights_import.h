#pragma once
// Detectron2 and Caffe2 checkpoints (.pth, .pkl; detectron2_checkpoint.h) into a LibTorch
// model named like ours (weight_name_mapping.h), as Detectron2's DetectionCheckpointer loads
// them: tensors whose shape does not fit the model (class-dependent layers when NUM_CLASSES
// differs) are skipped with a log line each; keys of the file the model lacks, and tensors of
// the model the file lacks, are listed grouped. Every line written to `log` starts with
// "[weights] ".
#include <ATen/core/Tensor.h>

#include <cstddef>
#include <filesystem>
#include <iosfwd>
#include <map>
#include <string>

#include "trainer/model/weights/raw_tensor.h"
#include "trainer/model/weights/weight_name_mapping.h"

namespace torch::nn {
class Module;
}

namespace mrcnn::model::weights {

struct WeightImportSummary {
  std::string file;
  std::string format;  // "Detectron2 checkpoint, torch zip", "Caffe2 checkpoint, pickle", ...
  size_t loaded = 0;   // tensors of the model given by the file (0/1 norm statistics included)
  size_t model_tensors = 0;  // the model's parameters and buffers
  size_t shape_skipped = 0;
  size_t unknown = 0;  // keys of the file that match nothing in the model
  size_t ignored = 0;  // keys dropped on purpose (anchors, pixel statistics, ...)
  size_t missing = 0;  // tensors of the model the file does not give
};

// The model's parameters and buffers by state_dict name with their shapes (BatchNorm's
// num_batches_tracked left out).
ModelShapes ModelTensorShapes(const torch::nn::Module& model);

// A float32 CPU copy of `raw` (any element type it holds).
at::Tensor ToFloatTensor(const RawTensor& raw);

// Reads the checkpoint at `path`, maps its names to the model's and returns the float32
// tensors that fit it (our names), without touching the model: what a converter writes as
// model.safetensors. Logs as ImportDetectron2Weights. Throws std::runtime_error naming the file
// when it cannot be read, holds NaN or infinite weights, or has no tensor that fits the model.
std::map<std::string, at::Tensor> ReadDetectron2StateDict(const std::filesystem::path& path,
                                                          const torch::nn::Module& model,
                                                          std::ostream& log,
                                                          WeightImportSummary* summary = nullptr);

// As ReadDetectron2StateDict, then copies every tensor into the model's parameter or buffer
// of that name (without recording gradients; to the model's device and dtype). Ends the log
// with "[weights] loaded N of M tensors of the model from FILE (...)".
WeightImportSummary ImportDetectron2Weights(const std::filesystem::path& path,
                                            torch::nn::Module& model, std::ostream& log);

}  // namespace mrcnn::model::weights
