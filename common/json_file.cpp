#include "common/json_file.h"

#include <fstream>
#include <sstream>
#include <system_error>

#include "common/config_error.h"

namespace mrcnn::common {

std::optional<nlohmann::json> ReadJsonObjectFile(const std::filesystem::path& file) {
  std::error_code ec;
  if (!std::filesystem::exists(file, ec))
    return std::nullopt;
  std::ifstream in(file, std::ios::binary);
  if (!in)
    throw ConfigError(file.string(), "", "cannot be opened for reading");
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range for 1e400
    throw ConfigError(file.string(), "", std::string("is not valid JSON (") + e.what() + ")");
  }
  if (!doc.is_object()) {
    throw ConfigError(file.string(), "",
                      "must hold a JSON object at the top level, got " + JsonTypeName(doc));
  }
  return doc;
}

std::string JsonTypeName(const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::null:
      return "null";
    case nlohmann::json::value_t::boolean:
      return "a boolean";
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
    case nlohmann::json::value_t::number_float:
      return "a number";
    case nlohmann::json::value_t::string:
      return "a string";
    case nlohmann::json::value_t::array:
      return "an array";
    case nlohmann::json::value_t::object:
      return "an object";
    default:
      return "an unsupported value";
  }
}

std::optional<std::string> OptionalString(const nlohmann::json& obj, const std::string& key,
                                          const std::filesystem::path& file,
                                          const std::string& field) {
  const auto it = obj.find(key);
  if (it == obj.end())
    return std::nullopt;
  if (!it->is_string()) {
    throw ConfigError(file.string(), field,
                      "must be a string, got " + JsonTypeName(*it) + " " + it->dump());
  }
  return it->get<std::string>();
}

}  // namespace mrcnn::common
