#pragma once
// The benches' command line: `--name value` pairs and bare `--flag`s, no validation beyond
// presence (the Python drivers build these command lines). Header-only, shared by
// model_bench and train_step_bench.
#include <cstring>
#include <stdexcept>
#include <string>

namespace mrcnn::bench {

// The value after `name`, else `fallback`; a null fallback makes the argument required.
inline std::string Arg(int argc, char** argv, const char* name, const char* fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0)
      return argv[i + 1];
  }
  if (fallback == nullptr)
    throw std::runtime_error(std::string("missing argument ") + name);
  return fallback;
}

inline bool Flag(int argc, char** argv, const char* name) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0)
      return true;
  }
  return false;
}

}  // namespace mrcnn::bench
