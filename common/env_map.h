#pragma once
// The process environment as an ordered map, so every parser takes its
// environment as a value (tests pass their own) instead of reading getenv.
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>

namespace mrcnn::common {

using EnvMap = std::map<std::string, std::string>;

// Snapshot of `environ` at the time of the call.
EnvMap CurrentEnvironment();

// The value of `key`, or nullopt when unset. A variable set to "" is present.
std::optional<std::string> Lookup(const EnvMap& env, const std::string& key);

// What an empty (or blank) variable means to EnvInteger.
enum class EmptyEnv {
  kUnset,  // as if it were not set
  kError,  // not an integer: a ConfigError
};

// env[key] as a whole decimal integer (blanks around it allowed) within [min, max];
// nullopt when unset (or empty, with EmptyEnv::kUnset). Anything else is a
// ConfigError("environment", key, "must be an integer[ in [min, max]], got \"...\"").
std::optional<int64_t> EnvInteger(const EnvMap& env, const std::string& key,
                                  int64_t min = std::numeric_limits<int64_t>::min(),
                                  int64_t max = std::numeric_limits<int64_t>::max(),
                                  EmptyEnv empty = EmptyEnv::kUnset);

}  // namespace mrcnn::common
