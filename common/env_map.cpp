#include "common/env_map.h"

extern char** environ;  // POSIX: declared by no standard header we include

namespace mrcnn::common {

EnvMap CurrentEnvironment() {
  EnvMap env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string assignment(*entry);
    const auto eq = assignment.find('=');
    if (eq == std::string::npos)
      continue;  // malformed entries exist in the wild; skip them
    env.emplace(assignment.substr(0, eq), assignment.substr(eq + 1));
  }
  return env;
}

std::optional<std::string> Lookup(const EnvMap& env, const std::string& key) {
  const auto it = env.find(key);
  if (it == env.end())
    return std::nullopt;
  return it->second;
}

}  // namespace mrcnn::common
