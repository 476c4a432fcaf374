#include "trainer/engine/config/config_value.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <cstdio>
#include <optional>
#include <sstream>

namespace mrcnn::engine {
namespace {

// YAML 1.2 core-schema booleans; yaml-cpp's as<bool> also takes yes/no/on/off, which
// would turn a typo into a silent value.
std::optional<bool> ParseBool(const std::string& text) {
  if (text == "true" || text == "True" || text == "TRUE") return true;
  if (text == "false" || text == "False" || text == "FALSE") return false;
  return std::nullopt;
}

std::optional<int64_t> ParseInt(const std::string& text) {
  if (text.empty()) return std::nullopt;
  size_t used = 0;
  try {
    long long v = std::stoll(text, &used, 10);
    if (used != text.size()) return std::nullopt;
    return static_cast<int64_t>(v);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::optional<double> ParseFloat(const std::string& text) {
  if (text.empty()) return std::nullopt;
  if (text == ".inf" || text == "inf") return HUGE_VAL;
  if (text == "-.inf" || text == "-inf") return -HUGE_VAL;
  size_t used = 0;
  try {
    double v = std::stod(text, &used);
    if (used != text.size()) return std::nullopt;
    return v;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

bool IsPlainScalar(const YAML::Node& node) { return node.IsScalar() && node.Tag() != "!"; }

template <typename T, typename Parse>
bool ConvertList(const YAML::Node& node, Parse parse, std::vector<T>& out) {
  std::vector<T> values;
  if (node.IsScalar()) {  // a single number where a list is expected (Detectron2 accepts it)
    auto v = parse(node);
    if (!v) return false;
    values.push_back(*v);
  } else if (node.IsSequence()) {
    for (const auto& item : node) {
      if (!item.IsScalar()) return false;
      auto v = parse(item);
      if (!v) return false;
      values.push_back(*v);
    }
  } else {
    return false;
  }
  out = std::move(values);
  return true;
}

std::optional<int64_t> NodeInt(const YAML::Node& n) {
  if (!IsPlainScalar(n)) return std::nullopt;
  return ParseInt(n.Scalar());
}
std::optional<double> NodeFloat(const YAML::Node& n) {
  if (!IsPlainScalar(n)) return std::nullopt;
  return ParseFloat(n.Scalar());
}
std::optional<bool> NodeBool(const YAML::Node& n) {
  if (!IsPlainScalar(n)) return std::nullopt;
  return ParseBool(n.Scalar());
}
std::optional<std::string> NodeString(const YAML::Node& n) {
  if (!n.IsScalar()) return std::nullopt;
  return n.Scalar();
}

std::string FloatText(double v) {
  if (std::isinf(v)) return v > 0 ? ".inf" : "-.inf";
  if (std::isnan(v)) return "null";  // a nullable key's None (config.h kNullableFloatKeys)
  char buf[64];
  // Shortest of %.15g/%.17g that reads back exactly.
  std::snprintf(buf, sizeof buf, "%.15g", v);
  if (std::stod(buf) != v) std::snprintf(buf, sizeof buf, "%.17g", v);
  std::string s = buf;
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

std::string StringText(const std::string& s) {
  YAML::Emitter out;
  out << YAML::DoubleQuoted << s;
  return out.c_str();
}

template <typename T, typename F>
std::string ListText(const std::vector<T>& values, F text) {
  std::string s = "[";
  for (size_t i = 0; i < values.size(); ++i) s += (i ? ", " : "") + text(values[i]);
  return s + "]";
}

}  // namespace

const char* TypeName(const ConfigValue& value) {
  static const char* const kNames[] = {"bool",          "int",             "float",
                                       "string",        "list of ints",    "list of floats",
                                       "list of strings", "list of lists of floats",
                                       "list of bools"};
  return kNames[value.index()];
}

bool ConvertYaml(const YAML::Node& node, const ConfigValue& like, ConfigValue& out) {
  if (!node.IsDefined()) return false;
  return std::visit(
      [&](const auto& sample) -> bool {
        using T = std::decay_t<decltype(sample)>;
        if constexpr (std::is_same_v<T, bool>) {
          if (!IsPlainScalar(node)) return false;
          auto v = ParseBool(node.Scalar());
          if (!v) return false;
          out = *v;
        } else if constexpr (std::is_same_v<T, int64_t>) {
          auto v = NodeInt(node);
          if (!v) return false;
          out = *v;
        } else if constexpr (std::is_same_v<T, double>) {
          auto v = NodeFloat(node);
          if (!v) return false;
          out = *v;
        } else if constexpr (std::is_same_v<T, std::string>) {
          if (node.IsNull()) {
            out = std::string();
            return true;
          }
          auto v = NodeString(node);
          if (!v) return false;
          out = *v;
        } else if constexpr (std::is_same_v<T, IntList>) {
          IntList v;
          if (!ConvertList(node, NodeInt, v)) return false;
          out = std::move(v);
        } else if constexpr (std::is_same_v<T, FloatList>) {
          FloatList v;
          if (!ConvertList(node, NodeFloat, v)) return false;
          out = std::move(v);
        } else if constexpr (std::is_same_v<T, StringList>) {
          StringList v;
          if (!ConvertList(node, NodeString, v)) return false;
          out = std::move(v);
        } else if constexpr (std::is_same_v<T, BoolList>) {
          BoolList v;
          if (!ConvertList(node, NodeBool, v)) return false;
          out = std::move(v);
        } else {
          if (!node.IsSequence()) return false;
          FloatListList v;
          for (const auto& item : node) {
            FloatList inner;
            // [32, 64] is ambiguous here (one level with two sizes, or two levels?): refuse it.
            if (!item.IsSequence() || !ConvertList(item, NodeFloat, inner)) return false;
            v.push_back(std::move(inner));
          }
          out = std::move(v);
        }
        return true;
      },
      like);
}

std::string ToYamlText(const ConfigValue& value) {
  return std::visit(
      [](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool>) {
          return v ? "true" : "false";
        } else if constexpr (std::is_same_v<T, int64_t>) {
          return std::to_string(v);
        } else if constexpr (std::is_same_v<T, double>) {
          return FloatText(v);
        } else if constexpr (std::is_same_v<T, std::string>) {
          return StringText(v);
        } else if constexpr (std::is_same_v<T, IntList>) {
          return ListText(v, [](int64_t x) { return std::to_string(x); });
        } else if constexpr (std::is_same_v<T, FloatList>) {
          return ListText(v, FloatText);
        } else if constexpr (std::is_same_v<T, StringList>) {
          return ListText(v, StringText);
        } else if constexpr (std::is_same_v<T, BoolList>) {
          return ListText(v, [](bool x) { return std::string(x ? "true" : "false"); });
        } else {
          return ListText(v, [](const FloatList& inner) { return ListText(inner, FloatText); });
        }
      },
      value);
}

}  // namespace mrcnn::engine
