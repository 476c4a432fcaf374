#include "trainer/engine/model_export.h"

#include <torch/torch.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "trainer/data/coco_dataset.h"
#include "trainer/engine/config/config.h"
#include "trainer/model/meta_arch/meta_arch.h"
#include "trainer/model/safetensors.h"

namespace mrcnn::engine {
namespace fs = std::filesystem;

void WriteModelDir(model::MetaArchitecture& net, const TrainConfig& config,
                   const data::CocoDataset& dataset, const fs::path& dir) {
  fs::create_directories(dir);
  model::TensorMap weights;
  for (const auto& [name, value] : model::StateDict(net)) {
    if (name.size() >= 19 && name.compare(name.size() - 19, 19, "num_batches_tracked") == 0)
      continue;
    weights[name] = value.detach().to(torch::kCPU, torch::kFloat).contiguous();
  }
  model::WriteSafetensors(dir / "model.safetensors", weights, {{"format", "pt"}});
  TrainConfig written = config;
  written.Set("MODEL.WEIGHTS", ConfigValue(std::string()), "model dir");
  {
    std::ofstream out(dir / "config.yaml");
    out << written.ToYaml();
    if (!out)
      throw std::runtime_error("cannot write " + (dir / "config.yaml").string());
  }
  nlohmann::json classes = nlohmann::json::array();
  for (const auto& c : dataset.categories())
    classes.push_back({{"id", c.id}, {"name", c.name}});
  std::ofstream out(dir / "classes.json");
  out << classes.dump(2) << '\n';
  if (!out)
    throw std::runtime_error("cannot write " + (dir / "classes.json").string());
}

void DumpWeights(model::MetaArchitecture& net, const fs::path& dir, int64_t rank,
                 const std::string& when) {
  model::TensorMap weights;
  for (const auto& [name, value] : model::StateDict(net))
    weights[name] = value.detach().to(torch::kCPU).contiguous();
  fs::create_directories(dir);
  model::WriteSafetensors(dir / (when + "_rank" + std::to_string(rank) + ".safetensors"), weights,
                          {{"format", "pt"}});
}

}  // namespace mrcnn::engine
