#include "trainer/engine/config/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <set>
#include <sstream>

#include "common/config_error.h"
#include "common/utf8.h"

namespace mrcnn::engine {
namespace {

using common::ConfigError;

std::string Upper(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return s;
}

std::vector<std::string> Keys(const std::map<std::string, ConfigValue>& values) {
  std::vector<std::string> keys;
  keys.reserve(values.size());
  for (const auto& entry : values) keys.push_back(entry.first);
  return keys;
}

// Group prefixes ("SOLVER", "SOLVER.CLIP_GRADIENTS", ...) of the known keys.
bool IsGroup(const std::map<std::string, ConfigValue>& values, const std::string& prefix) {
  auto it = values.lower_bound(prefix + ".");
  return it != values.end() && it->first.compare(0, prefix.size() + 1, prefix + ".") == 0;
}

std::string UnknownKeyProblem(const std::map<std::string, ConfigValue>& values, const std::string& key) {
  std::string closest = ClosestKey(key, Keys(values));
  return "is not a config key" + (closest.empty() ? std::string() : "; did you mean \"" + closest + "\"?");
}

// Python-style tuples "(1, 2)" become YAML flow lists, as Detectron2 users write them.
std::string TupleToList(const std::string& text) {
  size_t first = text.find_first_not_of(" \t");
  size_t last = text.find_last_not_of(" \t");
  if (first == std::string::npos || text[first] != '(' || text[last] != ')') return text;
  std::string inner = text.substr(first + 1, last - first - 1);
  std::replace(inner.begin(), inner.end(), '(', '[');
  std::replace(inner.begin(), inner.end(), ')', ']');
  return "[" + inner + "]";
}

}  // namespace

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string ClosestKey(const std::string& key, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = SIZE_MAX;
  const std::string upper = Upper(key);
  for (const auto& candidate : candidates) {
    size_t d = EditDistance(upper, Upper(candidate));
    if (d < best_distance) {
      best_distance = d;
      best = candidate;
    }
  }
  return best;
}

namespace {

// YAML lets a mapping repeat a key; yaml-cpp's lookup then sees the first and remove() drops
// one. A second _BASE_ would be followed without the cycle check (found by fuzzing: a file
// naming itself as its second _BASE_ recursed until the stack overflowed), so it is refused.
void CheckOneBase(const YAML::Node& root, const std::string& source) {
  if (!root.IsMap())
    return;
  int count = 0;
  for (const auto& entry : root)
    if (entry.first.IsScalar() && entry.first.Scalar() == "_BASE_")
      ++count;
  if (count > 1)
    throw ConfigError(source, "_BASE_", "appears " + std::to_string(count) +
                                            " times; a config file names one base file");
}

}  // namespace

void TrainConfig::MergeFile(const std::filesystem::path& path) {
  std::vector<std::filesystem::path> chain;
  MergeFileChain(path, chain);
}

void TrainConfig::MergeFileChain(const std::filesystem::path& path,
                                 std::vector<std::filesystem::path>& chain) {
  std::error_code ec;
  std::filesystem::path canonical = std::filesystem::weakly_canonical(path, ec);
  if (ec) canonical = path;
  if (std::find(chain.begin(), chain.end(), canonical) != chain.end()) {
    std::string cycle;
    for (const auto& p : chain) cycle += p.string() + " -> ";
    throw ConfigError(path.string(), "_BASE_", "forms a cycle: " + cycle + canonical.string());
  }
  // The error_code overload: a path the system refuses (a name over NAME_MAX, a component
  // that is a file, no permission) is a bad config, not a std::filesystem exception.
  const std::filesystem::file_status status = std::filesystem::status(path, ec);
  if (ec && ec != std::errc::no_such_file_or_directory) {
    throw ConfigError(path.string(), "", "config file cannot be read: " + ec.message());
  }
  if (!std::filesystem::is_regular_file(status)) {
    throw ConfigError(path.string(), "", "config file does not exist (or is not a regular file)");
  }
  YAML::Node root;
  try {
    root = YAML::LoadFile(path.string());
  } catch (const YAML::Exception& e) {
    throw ConfigError(path.string(), "", std::string("is not valid YAML: ") + e.what());
  }
  CheckOneBase(root, path.string());
  chain.push_back(canonical);
  if (root.IsMap() && root["_BASE_"]) {
    const YAML::Node base = root["_BASE_"];
    if (!base.IsScalar() || base.Scalar().empty()) {
      throw ConfigError(path.string(), "_BASE_", "must be a file path (relative to this file's directory)");
    }
    std::filesystem::path base_path = base.Scalar();
    if (base_path.is_relative()) base_path = path.parent_path() / base_path;
    MergeFileChain(base_path, chain);
  }
  chain.pop_back();
  // _BASE_ was merged above; MergeYaml must not follow it again.
  YAML::Node own = YAML::Clone(root);
  if (own.IsMap()) own.remove("_BASE_");
  MergeYaml(own, path.string(), path.parent_path());
}

void TrainConfig::MergeYaml(const YAML::Node& root, const std::string& source,
                            const std::filesystem::path& base_dir) {
  if (root.IsNull() || !root.IsDefined()) return;  // an empty file changes nothing
  if (!root.IsMap()) throw ConfigError(source, "", "must be a YAML mapping of config keys");
  CheckOneBase(root, source);
  if (root["_BASE_"]) {
    const YAML::Node base = root["_BASE_"];
    if (!base.IsScalar() || base.Scalar().empty()) {
      throw ConfigError(source, "_BASE_", "must be a file path (relative to this file's directory)");
    }
    std::filesystem::path base_path = base.Scalar();
    if (base_path.is_relative()) base_path = base_dir / base_path;
    MergeFile(base_path);
  }
  // Depth-first over nested maps; a map where a leaf is expected is walked, a leaf where
  // a group is expected is an error (via Set's unknown-key check).
  // A YAML key may be a list or a map ("[a, b]: 1"); a config key is a name.
  const auto name_of = [&](const YAML::Node& key, const std::string& group) {
    if (!key.IsScalar()) {
      throw ConfigError(source, group,
                        "has a key that is a YAML list or map; keys are names such as SOLVER");
    }
    return key.Scalar();
  };
  std::vector<std::pair<std::string, YAML::Node>> stack;
  for (auto it = root.begin(); it != root.end(); ++it) {
    std::string key = name_of(it->first, "");
    if (key == "_BASE_") continue;
    stack.emplace_back(key, it->second);
  }
  while (!stack.empty()) {
    auto [key, node] = stack.back();
    stack.pop_back();
    if (node.IsMap() && !Has(key)) {
      if (!IsGroup(values_, key)) throw ConfigError(source, key, UnknownKeyProblem(values_, key));
      for (auto it = node.begin(); it != node.end(); ++it) {
        stack.emplace_back(key + "." + name_of(it->first, key), it->second);
      }
      continue;
    }
    Set(key, node, source);
  }
}

std::vector<std::string> TrainConfig::SplitOpts(const std::string& text) {
  size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '[') {
    try {
      YAML::Node list = YAML::Load(text);
      if (list.IsSequence()) {
        std::vector<std::string> tokens;
        bool all_scalars = true;
        for (const auto& item : list) {
          if (!item.IsScalar()) {
            all_scalars = false;
            break;
          }
          tokens.push_back(item.Scalar());
        }
        if (all_scalars) return tokens;
      }
    } catch (const YAML::Exception&) {
      // Not a list after all: fall through to plain splitting.
    }
  }
  std::vector<std::string> tokens;
  std::string current;
  bool in_token = false;
  int depth = 0;
  char quote = 0;
  for (char ch : text) {
    if (quote) {
      if (ch == quote) {
        quote = 0;
      } else {
        current += ch;
      }
      continue;
    }
    if ((ch == '"' || ch == '\'') && depth == 0) {
      quote = ch;
      in_token = true;
      continue;
    }
    if (ch == '[' || ch == '(') ++depth;
    if ((ch == ']' || ch == ')') && depth > 0) --depth;
    if (depth == 0 && std::isspace(static_cast<unsigned char>(ch))) {
      if (in_token) tokens.push_back(current);
      current.clear();
      in_token = false;
      continue;
    }
    current += ch;
    in_token = true;
  }
  if (quote) throw ConfigError("opts", "", "has an unterminated quote in \"" + text + "\"");
  if (depth != 0) throw ConfigError("opts", "", "has an unbalanced bracket in \"" + text + "\"");
  if (in_token) tokens.push_back(current);
  return tokens;
}

void TrainConfig::MergeOpts(const std::vector<std::string>& pairs, const std::string& source) {
  if (pairs.size() % 2 != 0) {
    throw ConfigError(source, pairs.back(),
                      "has no value: opts must be KEY VALUE pairs (got " + std::to_string(pairs.size()) +
                          " tokens)");
  }
  for (size_t i = 0; i < pairs.size(); i += 2) {
    const std::string& key = pairs[i];
    if (!Has(key)) throw ConfigError(source, key, UnknownKeyProblem(values_, key));
    YAML::Node node;
    try {
      node = YAML::Load(TupleToList(pairs[i + 1]));
    } catch (const YAML::Exception&) {
      // Not YAML: keep the text as a plain string (type checking below still applies).
      node = YAML::Node(pairs[i + 1]);
    }
    if (std::holds_alternative<std::string>(values_.at(key)) && node.IsScalar()) {
      node = YAML::Node(pairs[i + 1]);  // strings verbatim, e.g. "0.01" for a string key
    }
    Set(key, node, source);
  }
}

void TrainConfig::Set(const std::string& key, const YAML::Node& value, const std::string& source) {
  auto it = values_.find(key);
  if (it == values_.end()) throw ConfigError(source, key, UnknownKeyProblem(values_, key));
  if (value.IsNull() && kNullableFloatKeys.contains(key)) {
    // Detectron2's None ("follow another key"), kept as NaN and written back as null.
    it->second = std::numeric_limits<double>::quiet_NaN();
    return;
  }
  ConfigValue converted;
  if (!ConvertYaml(value, it->second, converted)) {
    std::string shown;
    if (value.IsScalar()) {
      shown = "\"" + value.Scalar() + "\"";
    } else {
      YAML::Emitter out;
      out << YAML::Flow << value;
      shown = out.c_str();
    }
    throw ConfigError(source, key,
                      std::string("must be a ") + TypeName(it->second) + ", got " + shown + " (default: " +
                          ToYamlText(it->second) + ")");
  }
  // yaml-cpp reads bytes that are not UTF-8 as they are but writes them as U+FFFD, so ToYaml()
  // (the model dir's config.yaml) would name another value. Found by fuzzing.
  const auto utf8 = [](const std::string& text) { return common::IsValidUtf8(text); };
  const auto* text = std::get_if<std::string>(&converted);
  const auto* texts = std::get_if<StringList>(&converted);
  if ((text && !utf8(*text)) || (texts && !std::all_of(texts->begin(), texts->end(), utf8))) {
    throw ConfigError(source, key, "is not valid UTF-8 text; config files and opts must be UTF-8");
  }
  it->second = std::move(converted);
}

void TrainConfig::Set(const std::string& key, ConfigValue value, const std::string& source) {
  auto it = values_.find(key);
  if (it == values_.end()) throw ConfigError(source, key, UnknownKeyProblem(values_, key));
  if (it->second.index() != value.index()) {
    throw ConfigError(source, key, std::string("must be a ") + TypeName(it->second) + ", got a " + TypeName(value));
  }
  it->second = std::move(value);
}

bool TrainConfig::operator==(const TrainConfig& other) const {
  return std::equal(values_.begin(), values_.end(), other.values_.begin(), other.values_.end(),
                    [](const auto& a, const auto& b) {
                      const auto* x = std::get_if<double>(&a.second);
                      const auto* y = std::get_if<double>(&b.second);
                      if (x && y && std::isnan(*x) && std::isnan(*y)) return a.first == b.first;
                      return a == b;
                    });
}

const ConfigValue& TrainConfig::Get(const std::string& key) const {
  auto it = values_.find(key);
  if (it == values_.end()) throw ConfigError("config", key, UnknownKeyProblem(values_, key));
  return it->second;
}

namespace {
template <typename T>
const T& As(const TrainConfig& config, const std::string& key) {
  const ConfigValue& v = config.Get(key);
  if (const T* p = std::get_if<T>(&v)) return *p;
  throw ConfigError("config", key, std::string("is a ") + TypeName(v) + ", read as another type (a bug)");
}
}  // namespace

bool TrainConfig::GetBool(const std::string& key) const { return As<bool>(*this, key); }
int64_t TrainConfig::GetInt(const std::string& key) const { return As<int64_t>(*this, key); }
double TrainConfig::GetFloat(const std::string& key) const { return As<double>(*this, key); }
const std::string& TrainConfig::GetString(const std::string& key) const { return As<std::string>(*this, key); }
const IntList& TrainConfig::GetIntList(const std::string& key) const { return As<IntList>(*this, key); }
const FloatList& TrainConfig::GetFloatList(const std::string& key) const { return As<FloatList>(*this, key); }
const StringList& TrainConfig::GetStringList(const std::string& key) const { return As<StringList>(*this, key); }
const FloatListList& TrainConfig::GetFloatListList(const std::string& key) const {
  return As<FloatListList>(*this, key);
}
const BoolList& TrainConfig::GetBoolList(const std::string& key) const { return As<BoolList>(*this, key); }

std::string TrainConfig::ToYaml() const {
  // Keys are sorted, so a group's keys are contiguous: open/close groups by comparing the
  // path components with the previous key's.
  std::ostringstream out;
  std::vector<std::string> open;
  for (const auto& [key, value] : values_) {
    std::vector<std::string> parts;
    std::stringstream ss(key);
    for (std::string part; std::getline(ss, part, '.');) parts.push_back(part);
    size_t common = 0;
    while (common < open.size() && common + 1 < parts.size() && open[common] == parts[common]) ++common;
    open.resize(common);
    for (size_t i = common; i + 1 < parts.size(); ++i) {
      out << std::string(2 * i, ' ') << parts[i] << ":\n";
      open.push_back(parts[i]);
    }
    out << std::string(2 * (parts.size() - 1), ' ') << parts.back() << ": " << ToYamlText(value) << "\n";
  }
  return out.str();
}

YAML::Node TrainConfig::ToYamlNode() const { return YAML::Load(ToYaml()); }

}  // namespace mrcnn::engine
