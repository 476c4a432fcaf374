#include "common/hyperparameters.h"

#include <fmt/format.h>

#include <limits>

#include "common/config_error.h"
#include "common/json_file.h"
#include "common/python_encoding.h"

namespace mrcnn::common {
namespace {

constexpr size_t kMaxEntries = 100;  // CreateTrainingJob's HyperParameters limit

// Keys the toolkit removes from the user's set: every "sagemaker_" key plus
// these two (params.SAGEMAKER_HYPERPARAMETERS).
bool IsFrameworkKey(const std::string& key) {
  return key.starts_with("sagemaker_") || key == "_tuning_objective_metric" ||
         key == "default_user_module_name";
}

nlohmann::json DecodeValue(const nlohmann::json& value) {
  if (!value.is_string())
    return value;  // raw-API users may write typed JSON directly
  // Python's json.loads also accepts these three constants; nlohmann does not.
  const auto& text = value.get_ref<const std::string&>();
  if (text == "NaN")
    return std::numeric_limits<double>::quiet_NaN();
  if (text == "Infinity")
    return std::numeric_limits<double>::infinity();
  if (text == "-Infinity")
    return -std::numeric_limits<double>::infinity();
  auto decoded = nlohmann::json::parse(value.get_ref<const std::string&>(), nullptr,
                                       /*allow_exceptions=*/false);
  return decoded.is_discarded() ? value : decoded;
}

}  // namespace

std::vector<std::string> Hyperparameters::UserArgv() const {
  std::vector<std::string> argv;
  for (const auto& [key, value] : user.items()) {  // nlohmann objects iterate in sorted key order
    argv.push_back(key.size() > 1 ? "--" + key : "-" + key);
    if (value.is_object()) {
      // The toolkit renders a dict as "k=v,k2=v2" with keys sorted.
      std::string joined;
      for (const auto& [k, v] : value.items()) {
        if (!joined.empty())
          joined.push_back(',');
        joined += k + "=" + PythonStr(v);
      }
      argv.push_back(joined);
    } else if (value.is_null()) {
      argv.emplace_back();
    } else {
      argv.push_back(PythonStr(value));
    }
  }
  return argv;
}

Hyperparameters ParseHyperparameters(const std::filesystem::path& file) {
  Hyperparameters hps;
  const auto doc = ReadJsonObjectFile(file);
  if (!doc)
    return hps;
  if (doc->size() > kMaxEntries) {
    throw ConfigError(
        file.string(), "",
        fmt::format("has {} entries; SageMaker allows at most {}", doc->size(), kMaxEntries));
  }
  for (const auto& [key, value] : doc->items()) {
    if (key.empty())
      throw ConfigError(file.string(), key, "is an empty hyperparameter name; remove it");
    (IsFrameworkKey(key) ? hps.framework : hps.user)[key] = DecodeValue(value);
  }
  return hps;
}

}  // namespace mrcnn::common
