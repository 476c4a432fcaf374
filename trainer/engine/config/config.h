#pragma once
// The training config: Detectron2-style dotted keys (MODEL.*, INPUT.*, DATASETS.*,
// DATALOADER.*, SOLVER.*, TEST.*, OUTPUT_DIR, SEED) with typed defaults in code
// (config_defaults.cpp), overridden by YAML files (with `_BASE_` inheritance) and then
// by "KEY VALUE ..." opts. Torch-free (target mrcnn_engine_config).
//
// Errors are common::ConfigError naming the source (file path or "opts"), the key and,
// for an unknown key, the closest valid one.
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "trainer/engine/config/config_value.h"

namespace YAML {
class Node;
}

namespace mrcnn::engine {

// Float keys whose Detectron2 default is None: null in a config (Detectron2's dump writes it)
// is NaN here, read by the key's user as "follow the key it defaults to", and written back as
// null. SOLVER.WEIGHT_DECAY_BIAS follows SOLVER.WEIGHT_DECAY.
// MODEL.RPN.SMOOTH_L1_BETA and MODEL.ROI_BOX_HEAD.SMOOTH_L1_BETA follow the convention (torchvision's
// 1/9, Detectron2's 0).
inline const std::set<std::string> kNullableFloatKeys = {
    "SOLVER.WEIGHT_DECAY_BIAS", "MODEL.RPN.SMOOTH_L1_BETA", "MODEL.ROI_BOX_HEAD.SMOOTH_L1_BETA"};

class TrainConfig {
 public:
  // Every key with its default.
  static TrainConfig Defaults();

  // Merges a YAML file over this config. `_BASE_` (a path relative to the file's
  // directory, or absolute) is merged first, recursively; a cycle is an error. Nested
  // maps give dotted keys (SOLVER: {BASE_LR: 0.01} sets SOLVER.BASE_LR).
  void MergeFile(const std::filesystem::path& path);
  // Merges an already-parsed YAML document; `source` names it in errors. `_BASE_` is
  // resolved relative to `base_dir`.
  void MergeYaml(const YAML::Node& root, const std::string& source,
                 const std::filesystem::path& base_dir);
  // Merges "KEY VALUE KEY VALUE ..." pairs; each value is read as YAML (so "[1, 2]",
  // "(1, 2)", "true", "0.01", "abc" all work).
  void MergeOpts(const std::vector<std::string>& pairs, const std::string& source = "opts");
  // Splits an opts string into tokens: whitespace separates tokens except inside
  // quotes, brackets and parentheses. A string that is a YAML/JSON list of scalars
  // (["SOLVER.BASE_LR", "0.01"], as the SageMaker SDK encodes a list) gives its elements.
  static std::vector<std::string> SplitOpts(const std::string& text);

  // Sets one key from a YAML node, with type checking.
  void Set(const std::string& key, const YAML::Node& value, const std::string& source);
  void Set(const std::string& key, ConfigValue value, const std::string& source);

  bool Has(const std::string& key) const { return values_.count(key) != 0; }
  const ConfigValue& Get(const std::string& key) const;
  bool GetBool(const std::string& key) const;
  int64_t GetInt(const std::string& key) const;
  double GetFloat(const std::string& key) const;
  const std::string& GetString(const std::string& key) const;
  const IntList& GetIntList(const std::string& key) const;
  const FloatList& GetFloatList(const std::string& key) const;
  const StringList& GetStringList(const std::string& key) const;
  const FloatListList& GetFloatListList(const std::string& key) const;
  const BoolList& GetBoolList(const std::string& key) const;

  const std::map<std::string, ConfigValue>& values() const { return values_; }

  // The whole config as nested YAML (block maps, flow lists), keys sorted. Reading it
  // back with MergeYaml over Defaults() gives an equal config.
  std::string ToYaml() const;
  // The same as a parsed document (for consumers such as model::ModelConfig::FromYaml).
  YAML::Node ToYamlNode() const;

  // Equal keys and values; NaN (a nullable key's null) equals NaN.
  bool operator==(const TrainConfig& other) const;

 private:
  void MergeFileChain(const std::filesystem::path& path, std::vector<std::filesystem::path>& chain);
  std::map<std::string, ConfigValue> values_;
};

// Levenshtein distance (for "did you mean").
size_t EditDistance(const std::string& a, const std::string& b);
// The candidate closest to `key` by edit distance (ties: the first in order); "" when
// `candidates` is empty.
std::string ClosestKey(const std::string& key, const std::vector<std::string>& candidates);

}  // namespace mrcnn::engine
