#include "entrypoint/program.h"

#include <fmt/format.h>
#include <unistd.h>

#include "common/config_error.h"

namespace mrcnn::entrypoint {
namespace fs = std::filesystem;
using common::ConfigError;

namespace {

bool IsExecutableFile(const fs::path& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec) && access(path.c_str(), X_OK) == 0;
}

// sagemaker_submit_directory is usually an s3:// URI the platform has already
// unpacked into <base>/code; a local directory (plain or file://) is used as is.
fs::path CodeDirectory(const common::JobEnvironment& job) {
  const auto& framework = job.hyperparameters.framework;
  if (auto it = framework.find("sagemaker_submit_directory");
      it != framework.end() && it->is_string()) {
    std::string dir = it->get<std::string>();
    if (dir.rfind("file://", 0) == 0)
      dir = dir.substr(7);
    std::error_code ec;
    if (!dir.empty() && fs::is_directory(dir, ec))
      return dir;
  }
  return job.paths.code;
}

}  // namespace

fs::path SelfDirectory() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path(".") : self.parent_path();
}

ProgramChoice ResolveProgram(const common::JobEnvironment& job, const common::EnvMap& env,
                             const ProgramOptions& options) {
  std::string program;
  std::string source_file = "hyperparameters.json";
  std::string source_field = "sagemaker_program";
  const auto& framework = job.hyperparameters.framework;
  if (auto it = framework.find("sagemaker_program"); it != framework.end()) {
    if (!it->is_string() || it->get<std::string>().empty()) {
      throw ConfigError(source_file, source_field,
                        fmt::format("must name a file in the code directory, got {}", it->dump()));
    }
    program = it->get<std::string>();
  } else if (auto value = common::Lookup(env, "SAGEMAKER_PROGRAM"); value && !value->empty()) {
    program = *value;
    source_file = "environment";
    source_field = "SAGEMAKER_PROGRAM";
  }

  ProgramChoice choice;
  const std::vector<std::string> user_argv = job.hyperparameters.UserArgv();
  if (program.empty()) {
    fs::path trainer;
    std::string where;
    if (options.trainer) {
      trainer = *options.trainer;
      where = "--trainer";
    } else if (auto value = common::Lookup(env, "MRCNN_TRAINER"); value && !value->empty()) {
      trainer = *value;
      where = "MRCNN_TRAINER";
    } else {
      trainer = options.self_dir / "trainer";
      where = "the entrypoint's directory";
    }
    if (!IsExecutableFile(trainer)) {
      throw ConfigError("environment", "trainer",
                        fmt::format("no executable trainer at {} (from {}): build it with "
                                    "scripts/setup.sh, set MRCNN_TRAINER, or name your own program "
                                    "in the sagemaker_program hyperparameter",
                                    trainer.string(), where));
    }
    choice.argv = {trainer.string(), "train"};
  } else {
    const fs::path code_dir = CodeDirectory(job);
    const fs::path file = code_dir / program;
    std::error_code ec;
    if (!fs::is_regular_file(file, ec)) {
      throw ConfigError(source_file, source_field,
                        fmt::format("names \"{}\", but {} is not a file: put the program in the "
                                    "code directory {}",
                                    program, file.string(), code_dir.string()));
    }
    const std::string extension = file.extension().string();
    if (extension == ".py") {
      const auto python = common::Lookup(env, "MRCNN_PYTHON");
      choice.argv = {python && !python->empty() ? *python : "python3", file.string()};
    } else if (extension == ".sh") {
      choice.argv = {"/bin/sh", file.string()};
    } else if (IsExecutableFile(file)) {
      choice.argv = {file.string()};
    } else {
      throw ConfigError(source_file, source_field,
                        fmt::format("names {}, which is neither .py nor .sh nor executable: "
                                    "chmod +x it or use a .py/.sh script",
                                    file.string()));
    }
    choice.user_entry_point = program;
    choice.working_dir = code_dir.string();
  }
  choice.argv.insert(choice.argv.end(), user_argv.begin(), user_argv.end());
  choice.argv.insert(choice.argv.end(), options.extra_args.begin(), options.extra_args.end());
  return choice;
}

}  // namespace mrcnn::entrypoint
