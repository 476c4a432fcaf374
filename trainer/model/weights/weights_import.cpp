#include "trainer/model/weights/weights_import.h"

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include <ostream>
#include <stdexcept>

#include "trainer/model/weights/detectron2_checkpoint.h"

namespace mrcnn::model::weights {
namespace {

c10::ScalarType ScalarTypeOf(TensorDType dtype) {
  switch (dtype) {
    case TensorDType::kFloat64:
      return at::kDouble;
    case TensorDType::kFloat32:
      return at::kFloat;
    case TensorDType::kFloat16:
      return at::kHalf;
    case TensorDType::kBFloat16:
      return at::kBFloat16;
    case TensorDType::kInt64:
      return at::kLong;
    case TensorDType::kInt32:
      return at::kInt;
    case TensorDType::kInt16:
      return at::kShort;
    case TensorDType::kInt8:
      return at::kChar;
    case TensorDType::kUInt8:
      return at::kByte;
    case TensorDType::kBool:
      return at::kBool;
  }
  return at::kFloat;
}

void LogGrouped(std::ostream& log, const std::vector<std::string>& keys) {
  for (const std::string& line : GroupKeys(keys))
    log << "[weights]   " << line << "\n";
}

std::string FormatOf(const Detectron2Checkpoint& checkpoint) {
  std::string format =
      std::string(OriginName(checkpoint.origin)) + " checkpoint, " + checkpoint.container;
  if (!checkpoint.author.empty() && checkpoint.author != "Caffe2")
    format += ", __author__ '" + checkpoint.author + "'";
  return format;
}

void LogMapping(const WeightMapping& mapping, const std::vector<std::string>& non_tensors,
                std::ostream& log) {
  for (const ShapeMismatch& skip : mapping.shape_mismatches) {
    log << "[weights] skipped " << skip.checkpoint_key << ": shape " << ShapeString(skip.file_shape)
        << " in the file (as " << skip.model_key << "), " << ShapeString(skip.model_shape)
        << " in the model\n";
  }
  for (const std::string& note : mapping.notes)
    log << "[weights] note: " << note << "\n";
  if (!non_tensors.empty()) {
    log << "[weights] " << non_tensors.size()
        << " entries of the file are not tensors and are skipped:\n";
    LogGrouped(log, non_tensors);
  }
  if (!mapping.ignored.empty()) {
    log << "[weights] " << mapping.ignored.size()
        << " keys of the file are not weights of the model (dropped on purpose):\n";
    LogGrouped(log, mapping.ignored);
  }
  if (!mapping.unknown.empty()) {
    log << "[weights] " << mapping.unknown.size()
        << " keys of the file match nothing in the model:\n";
    LogGrouped(log, mapping.unknown);
  }
  if (!mapping.unplaced.empty()) {
    log << "[weights] " << mapping.unplaced.size()
        << " keys of the file belong to blocks this model builds otherwise:\n";
    LogGrouped(log, mapping.unplaced);
  }
  if (!mapping.missing.empty()) {
    log << "[weights] " << mapping.missing.size()
        << " tensors of the model are not in the file (left as initialised):\n";
    LogGrouped(log, mapping.missing);
  }
}

}  // namespace

ModelShapes ModelTensorShapes(const torch::nn::Module& model) {
  ModelShapes shapes;
  for (const auto& item : model.named_parameters(true))
    shapes[item.key()] = item.value().sizes().vec();
  for (const auto& item : model.named_buffers(true)) {
    // A buffer registered empty (undefined) holds nothing a checkpoint could fill.
    if (item.value().defined() && !item.key().ends_with("num_batches_tracked"))
      shapes[item.key()] = item.value().sizes().vec();
  }
  return shapes;
}

at::Tensor ToFloatTensor(const RawTensor& raw) {
  const auto options = at::TensorOptions().dtype(ScalarTypeOf(raw.dtype));
  // from_blob does not own the bytes: the conversion (or clone) below copies them.
  const at::Tensor view = at::from_blob(const_cast<char*>(raw.bytes.data()), raw.shape, options);
  return raw.dtype == TensorDType::kFloat32 ? view.clone() : view.to(at::kFloat);
}

std::map<std::string, at::Tensor> ReadDetectron2StateDict(const std::filesystem::path& path,
                                                          const torch::nn::Module& model,
                                                          std::ostream& log,
                                                          WeightImportSummary* summary_out) {
  Detectron2Checkpoint checkpoint = ReadCheckpointFile(path);
  const std::string file = path.string();
  WeightImportSummary summary;
  summary.file = file;
  summary.format = FormatOf(checkpoint);
  log << "[weights] reading " << file << " (" << summary.format
      << "): " << checkpoint.tensors.size() << " tensors\n";
  const ModelShapes shapes = ModelTensorShapes(model);
  const std::vector<std::string> non_tensors = checkpoint.skipped;
  WeightMapping mapping = MapCheckpointToModel(std::move(checkpoint), &shapes);
  LogMapping(mapping, non_tensors, log);

  summary.loaded = mapping.tensors.size();
  summary.model_tensors = shapes.size();
  summary.shape_skipped = mapping.shape_mismatches.size();
  summary.unknown = mapping.unknown.size();
  summary.ignored = mapping.ignored.size();
  summary.missing = mapping.missing.size();
  if (summary_out != nullptr)
    *summary_out = summary;
  if (!mapping.unplaced.empty()) {
    throw std::runtime_error(
        file + ": " + std::to_string(mapping.unplaced.size()) +
        " tensors of the checkpoint belong to blocks the model builds otherwise (e.g. " +
        mapping.unplaced.front() +
        "): it was trained with an architecture the config does not describe (a deformable "
        "convolution, MODEL.RESNETS.DEFORM_ON_PER_STAGE; a norm, MODEL.RESNETS.NORM, MODEL.FPN.NORM or "
        "MODEL.ROI_*_HEAD.NORM; a head's convs, MODEL.ROI_BOX_HEAD.NUM_CONV; ...). Give the config the "
        "checkpoint was trained with; loading the rest would predict as if those blocks were plain");
  }
  if (mapping.tensors.empty()) {
    std::string example = mapping.unknown.empty() ? "" : " (e.g. " + mapping.unknown.front() + ")";
    throw std::runtime_error(
        file + ": no tensor of the checkpoint fits the model" + example +
        ": it is not a Detectron2 or Caffe2 checkpoint of this architecture (MODEL.BACKBONE, "
        "MODEL.RESNETS, heads), or its shapes all differ");
  }

  std::map<std::string, at::Tensor> tensors;
  for (auto& [name, mapped] : mapping.tensors) {
    at::Tensor value = ToFloatTensor(mapped.tensor);
    mapped.tensor.bytes.clear();
    mapped.tensor.bytes.shrink_to_fit();  // keep one copy of the weights at a time
    if (!at::isfinite(value).all().item<bool>()) {
      throw std::runtime_error(file + ": tensor '" + mapped.checkpoint_key +
                               "' holds NaN or infinite values: the checkpoint is damaged");
    }
    tensors.emplace(name, std::move(value));
  }
  return tensors;
}

WeightImportSummary ImportDetectron2Weights(const std::filesystem::path& path,
                                            torch::nn::Module& model, std::ostream& log) {
  WeightImportSummary summary;
  const std::map<std::string, at::Tensor> tensors =
      ReadDetectron2StateDict(path, model, log, &summary);
  at::NoGradGuard no_grad;
  std::map<std::string, at::Tensor> targets;
  for (const auto& item : model.named_parameters(true))
    targets[item.key()] = item.value();
  for (const auto& item : model.named_buffers(true))
    targets[item.key()] = item.value();
  for (const auto& [name, value] : tensors)
    targets.at(name).copy_(value);
  log << "[weights] loaded " << summary.loaded << " of " << summary.model_tensors
      << " tensors of the model from " << summary.file << " (" << summary.format << "; "
      << summary.shape_skipped << " skipped for their shape, " << summary.unknown
      << " keys of the file unmatched, " << summary.ignored << " dropped on purpose, "
      << summary.missing << " of the model's tensors not in the file)\n";
  return summary;
}

}  // namespace mrcnn::model::weights
