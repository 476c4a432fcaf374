#pragma once
// Python's renderings of decoded JSON values, which the public sagemaker-training
// toolkit exposes to user programs and which we must reproduce byte for byte:
// SM_* values are json.dumps(v, sort_keys=True, separators=(",", ":"),
// ensure_ascii=True), and hyperparameter argv values are str(v).
#include <nlohmann/json.hpp>
#include <string>

namespace mrcnn::common {

// json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True).
// Floats use Python's repr (1e-05, 1e+16, 100.0); non-ASCII is \uXXXX-escaped.
std::string PythonJsonDumps(const nlohmann::json& value);

// str(value) of the decoded value: strings raw, True/False/None, lists as
// "[1, 'a']", dicts as "{'a': 1}" (keys in sorted order: nlohmann objects keep
// no insertion order, which only matters for dicts nested inside values).
std::string PythonStr(const nlohmann::json& value);

// The value of an SM_* variable for a decoded value, as the toolkit's
// mapping.to_env_vars: null -> "", strings raw, anything else PythonJsonDumps.
std::string PythonEnvValue(const nlohmann::json& value);

}  // namespace mrcnn::common
