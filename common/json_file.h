#pragma once
// Reading the small JSON config files SageMaker writes, with errors that name
// the file and the field.
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace mrcnn::common {

// nullopt when the file does not exist. ConfigError when it cannot be read,
// is not valid JSON, or its top level is not an object.
std::optional<nlohmann::json> ReadJsonObjectFile(const std::filesystem::path& file);

// The JSON type name the way error messages say it ("a string", "an array", ...).
std::string JsonTypeName(const nlohmann::json& value);

// obj[key] as a string: nullopt when absent, ConfigError (naming file and
// field) when present with another type.
std::optional<std::string> OptionalString(const nlohmann::json& obj, const std::string& key,
                                          const std::filesystem::path& file,
                                          const std::string& field);

}  // namespace mrcnn::common
