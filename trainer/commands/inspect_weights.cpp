// `trainer inspect-weights`: what a Detectron2 or Caffe2 checkpoint (.pth, .pkl) holds, as
// the trainer reads it (trainer/model/weights/), one JSON line per tensor; with a model
// config, the names the model gets them under and the load's summary. For users checking a
// file before a job, and for the tests that hold the reader to Python's.
#include <CLI/CLI.hpp>

// No fmt here: LibTorch's include dir ships fmt 12 headers that shadow the system fmt
// this binary links, so fmt calls from a Torch-including TU do not link.
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "trainer/commands/command_registry.h"
#include "trainer/model/config.h"
#include "trainer/model/meta_arch/meta_arch.h"
#include "trainer/model/weights/detectron2_checkpoint.h"
#include "trainer/model/weights/weight_name_mapping.h"
#include "trainer/model/weights/weights_import.h"

namespace mrcnn::trainer {
namespace {

namespace weights = model::weights;

struct InspectArgs {
  std::string file;
  std::string model_config;
  bool model_keys = false;
};

void PrintLine(const nlohmann::json& line) {
  std::printf("%s\n", line.dump().c_str());
}

nlohmann::json TensorLine(const std::string& name, const weights::RawTensor& tensor) {
  return {{"name", name},
          {"dtype", std::string(weights::DTypeName(tensor.dtype))},
          {"shape", tensor.shape},
          {"sum", tensor.Sum()}};
}

int Inspect(const InspectArgs& args) {
  if (args.file.empty() && !args.model_keys)
    throw std::runtime_error(
        "inspect-weights: name a checkpoint file (or --model-keys with --model-config)");
  if (args.model_keys && args.model_config.empty())
    throw std::runtime_error("inspect-weights: --model-keys needs --model-config");

  std::shared_ptr<model::MetaArchitecture> net;
  weights::ModelShapes shapes;
  if (!args.model_config.empty()) {
    net = model::BuildModel(model::ModelConfig::FromYamlFile(args.model_config));
    shapes = weights::ModelTensorShapes(*net);
  }
  if (args.model_keys) {
    for (const auto& [name, shape] : shapes)
      PrintLine({{"name", name}, {"shape", shape}});
    if (args.file.empty())
      return 0;
  }

  weights::Detectron2Checkpoint checkpoint = weights::ReadCheckpointFile(args.file);
  std::cerr << args.file << ": " << weights::OriginName(checkpoint.origin) << " checkpoint ("
            << checkpoint.container
            << (checkpoint.author.empty() ? "" : ", __author__ '" + checkpoint.author + "'")
            << (checkpoint.matching_heuristics ? ", matching heuristics" : "") << "), "
            << checkpoint.tensors.size() << " tensors, " << checkpoint.skipped.size()
            << " other entries skipped\n";
  if (!net) {
    for (const auto& [name, tensor] : checkpoint.tensors)
      PrintLine(TensorLine(name, tensor));
    return 0;
  }

  // The mapped tensors as the import would load them (re-laid out, before conversion to
  // float32), then the import itself for its log and summary.
  const weights::WeightMapping mapping =
      weights::MapCheckpointToModel(std::move(checkpoint), &shapes);
  for (const auto& [name, mapped] : mapping.tensors) {
    nlohmann::json line = TensorLine(name, mapped.tensor);
    line["checkpoint_key"] = mapped.checkpoint_key;
    PrintLine(line);
  }
  const weights::WeightImportSummary summary =
      weights::ImportDetectron2Weights(args.file, *net, std::cerr);
  PrintLine({{"summary",
              {{"file", summary.file},
               {"format", summary.format},
               {"loaded", summary.loaded},
               {"model_tensors", summary.model_tensors},
               {"shape_skipped", summary.shape_skipped},
               {"unknown", summary.unknown},
               {"ignored", summary.ignored},
               {"missing", summary.missing}}}});
  return 0;
}

const CommandRegistration kInspectWeights{
    "inspect-weights",
    "List the tensors of a Detectron2 or Caffe2 checkpoint (.pth, .pkl) as JSON lines; with "
    "--model-config, the model's names for them and the load summary",
    [](CLI::App& sub) -> CommandAction {
      auto args = std::make_shared<InspectArgs>();
      sub.add_option("file", args->file,
                     "Checkpoint: model_final.pth, a model zoo .pkl, R-50.pkl, ...");
      sub.add_option("--model-config", args->model_config,
                     "A config.yaml: map the names to this model's and load them as a job would");
      sub.add_flag("--model-keys", args->model_keys,
                   "Also list the model's own tensors ({name, shape} lines) first");
      return [args]() { return Inspect(*args); };
    }};

}  // namespace
}  // namespace mrcnn::trainer
