#pragma once
// One typed value of the training config. A key's type is fixed by its default: YAML
// files and opts overrides must give a value of that type (an integer is accepted where a
// float is expected, a single number where a list of numbers is expected).
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace YAML {
class Node;
}

namespace mrcnn::engine {

using IntList = std::vector<int64_t>;
using FloatList = std::vector<double>;
using StringList = std::vector<std::string>;
using FloatListList = std::vector<std::vector<double>>;
using BoolList = std::vector<bool>;

using ConfigValue = std::variant<bool, int64_t, double, std::string, IntList, FloatList, StringList,
                                 FloatListList, BoolList>;

// "bool", "int", "float", "string", "list of ints", ... for error messages.
const char* TypeName(const ConfigValue& value);

// Converts `node` to the type of `like`. Returns false (leaving `out` untouched) when the
// node does not hold a value of that type.
bool ConvertYaml(const YAML::Node& node, const ConfigValue& like, ConfigValue& out);

// Block-free YAML text of a value ("0.02", "[60000, 80000]", "\"\"", "true"); floats keep
// a decimal point or exponent so they read back as floats, with round-trip precision.
std::string ToYamlText(const ConfigValue& value);

}  // namespace mrcnn::engine
