#include "common/env_map.h"

#include <fmt/format.h>

#include <charconv>
#include <cstdint>

#include "common/config_error.h"

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

std::optional<int64_t> EnvInteger(const EnvMap& env, const std::string& key, int64_t min,
                                  int64_t max, EmptyEnv empty) {
  const auto raw = Lookup(env, key);
  if (!raw)
    return std::nullopt;
  const auto begin = raw->find_first_not_of(" \t");
  if (begin == std::string::npos && empty == EmptyEnv::kUnset)
    return std::nullopt;
  if (begin != std::string::npos) {
    const char* first = raw->data() + begin;
    const char* last = raw->data() + raw->find_last_not_of(" \t") + 1;
    int64_t value = 0;
    const auto res = std::from_chars(first, last, value);
    if (res.ec == std::errc() && res.ptr == last && value >= min && value <= max)
      return value;
  }
  // The range is worth saying only when it is narrower than an int's.
  const bool any_int =
      min <= std::numeric_limits<int32_t>::min() && max >= std::numeric_limits<int32_t>::max();
  throw ConfigError(
      "environment", key,
      any_int ? fmt::format("must be an integer, got \"{}\"", *raw)
              : fmt::format("must be an integer in [{}, {}], got \"{}\"", min, max, *raw));
}

}  // namespace mrcnn::common
