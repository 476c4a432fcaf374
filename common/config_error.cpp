#include "common/config_error.h"

#include <fmt/format.h>

namespace mrcnn::common {

ConfigError::ConfigError(const std::string& file, const std::string& field,
                         const std::string& problem)
    : std::runtime_error(field.empty() ? fmt::format("{}: {}", file, problem)
                                       : fmt::format("{}: \"{}\" {}", file, field, problem)),
      file_(file),
      field_(field) {}

}  // namespace mrcnn::common
