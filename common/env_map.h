#pragma once
// The process environment as an ordered map, so every parser takes its
// environment as a value (tests pass their own) instead of reading getenv.
#include <map>
#include <optional>
#include <string>

namespace mrcnn::common {

using EnvMap = std::map<std::string, std::string>;

// Snapshot of `environ` at the time of the call.
EnvMap CurrentEnvironment();

// The value of `key`, or nullopt when unset. A variable set to "" is present.
std::optional<std::string> Lookup(const EnvMap& env, const std::string& key);

}  // namespace mrcnn::common
