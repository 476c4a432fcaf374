// `trainer import-weights`: a Detectron2 checkpoint (a job's model_final.pth, a zoo .pkl) and
// its config into our model dir (model.safetensors, config.yaml, classes.json), through the
// same reader and name mapping the training job uses (trainer/model/weights/). What
// scripts/convert_weights.py runs for Detectron2 checkpoints, so there is one mapping.
#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "trainer/commands/command_registry.h"
#include "trainer/model/config.h"
#include "trainer/model/meta_arch/meta_arch.h"
#include "trainer/model/safetensors.h"
#include "trainer/model/weights/weights_import.h"

namespace mrcnn::trainer {
namespace {

namespace fs = std::filesystem;

struct ImportArgs {
  std::string checkpoint, config, classes, output;
};

// classes.json for the model dir: a COCO annotation file's categories, or a list of
// {"id", "name"}, in label order; without one, Detectron2's 0-based class indices as ids.
nlohmann::json ClassList(const std::string& path, int num_classes) {
  nlohmann::json list = nlohmann::json::array();
  if (path.empty()) {
    for (int i = 0; i < num_classes; ++i)
      list.push_back({{"id", i}, {"name", "class_" + std::to_string(i)}});
    return list;
  }
  std::ifstream in(path);
  if (!in)
    throw std::runtime_error(path + ": cannot open the class list (--classes)");
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(path + ": not valid JSON (" + e.what() + ")");
  }
  const nlohmann::json& entries =
      doc.is_object() && doc.contains("categories") ? doc["categories"] : doc;
  if (!entries.is_array())
    throw std::runtime_error(
        path + ": --classes needs a COCO file with \"categories\" or a list of {id, name}");
  for (const auto& e : entries) {
    if (!e.is_object() || !e.contains("id") || !e["id"].is_number_integer() ||
        !e.contains("name") || !e["name"].is_string())
      throw std::runtime_error(path +
                               ": every class needs an integer \"id\" and a string \"name\"");
    list.push_back({{"id", e["id"]}, {"name", e["name"]}});
  }
  if (static_cast<int>(list.size()) != num_classes) {
    throw std::runtime_error(path + ": lists " + std::to_string(list.size()) +
                             " classes but the config's MODEL.ROI_HEADS.NUM_CLASSES is " +
                             std::to_string(num_classes));
  }
  return list;
}

int Import(const ImportArgs& args) {
  const model::ModelConfig config = model::ModelConfig::FromYamlFile(args.config);
  const nlohmann::json classes = ClassList(args.classes, config.num_classes);
  auto net = model::BuildModel(config);
  // Strict: a model dir serves, so every tensor must come from the checkpoint.
  model::LoadStateDict(*net,
                       model::weights::ReadDetectron2StateDict(args.checkpoint, *net, std::cerr),
                       args.checkpoint);
  const fs::path out = args.output;
  fs::create_directories(out);
  model::WriteSafetensors(out / "model.safetensors", model::StateDict(*net));
  std::ofstream(out / "config.yaml") << config.ToYaml();
  std::ofstream(out / "classes.json") << classes.dump(1) << '\n';
  std::cerr << "import-weights: wrote " << (out / "model.safetensors").string()
            << ", config.yaml and classes.json (" << config.num_classes << " classes, "
            << config.convention << " convention)\n";
  return 0;
}

const CommandRegistration kImportWeights{
    "import-weights",
    "Write our model dir (model.safetensors, config.yaml, classes.json) from a Detectron2 "
    "checkpoint "
    "(.pth, .pkl) and its config.yaml",
    [](CLI::App& sub) -> CommandAction {
      auto args = std::make_shared<ImportArgs>();
      sub.add_option("--checkpoint", args->checkpoint, "model_final.pth, a model zoo .pkl, ...")
          ->required();
      sub.add_option("--config", args->config,
                     "The model's config.yaml: Detectron2's dump (what its job wrote "
                     "beside model_final.pth) or a model dir's")
          ->required();
      sub.add_option(
          "--classes", args->classes,
          "COCO annotation file or [{id, name}] list, in label order (default: ids 0..K-1)");
      sub.add_option("--output", args->output, "Model dir to write")->required();
      return [args]() { return Import(*args); };
    }};

}  // namespace
}  // namespace mrcnn::trainer
