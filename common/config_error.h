#pragma once
// The one error type for bad job configuration: it always names the source
// (a file name or an environment variable), the field and what was wrong.
#include <stdexcept>
#include <string>

namespace mrcnn::common {

class ConfigError : public std::runtime_error {
 public:
  // what() reads `<file>: "<field>" <problem>`, e.g.
  //   resourceconfig.json: "current_host" must be one of "hosts" ["algo-1","algo-2"], got "algo-3"
  // `file` is the file's path or, for environment problems, "environment".
  // With an empty field (a problem with the whole file) what() is `<file>: <problem>`.
  ConfigError(const std::string& file, const std::string& field, const std::string& problem);

  const std::string& file() const { return file_; }
  const std::string& field() const { return field_; }

 private:
  std::string file_;
  std::string field_;
};

}  // namespace mrcnn::common
