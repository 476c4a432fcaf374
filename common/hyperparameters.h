#pragma once
// input/config/hyperparameters.json (docs/contract.md, "Files").
//
// The SageMaker SDK sends every value as a string holding JSON ("10", "true",
// "\"train.py\"", "[1,2]"); the raw CreateTrainingJob API lets users send plain
// strings ("adam") too. Each value is JSON-decoded when it parses and kept as
// the raw string otherwise. Non-string JSON values (numbers, booleans, ...)
// written by hand or by other launchers are accepted as they are.
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace mrcnn::common {

struct Hyperparameters {
  // user keys -> decoded typed value.
  nlohmann::json user = nlohmann::json::object();
  // "sagemaker_*" keys and "_tuning_objective_metric" -> decoded value.
  nlohmann::json framework = nlohmann::json::object();

  // The user's hyperparameters as argv, byte for byte what the public toolkit
  // (mapping.to_cmd_args) gives: sorted by key, "--key" ("-k" for one-letter
  // keys) then the value as Python's str() of the decoded value — strings raw,
  // True/False, "[1, 2]", "0.001", "1e-05"; null gives ""; an object gives
  // "a=1,b=x" (sorted). Note booleans are "True"/"False", not JSON.
  std::vector<std::string> UserArgv() const;
};

// Absent file = no hyperparameters. Malformed JSON, a top-level value that is
// not an object, or more than 100 entries (SageMaker's own limit) is a ConfigError.
Hyperparameters ParseHyperparameters(const std::filesystem::path& file);

}  // namespace mrcnn::common
