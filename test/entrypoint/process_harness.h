#pragma once
// Running the real entrypoint binary from tests: a scratch /opt/ml tree, the
// process started with its output in files, waited for with a time limit, and
// killed (with its whole process group) if a test leaves early.
#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace mrcnn::test {

std::string EntrypointBinary();
std::string ChildBinary();

// A fresh directory under $TMPDIR, removed with everything in it.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// <dir>/ml: input/config/*.json, code/, output/ and a marker dir for children.
struct JobTree {
  explicit JobTree(const std::filesystem::path& dir);
  void WriteHyperparameters(
      const nlohmann::json& sdk_style) const;  // values JSON-encoded like the SDK
  // The file exactly as given (SDK v3's safe_serialize strings, raw-API values).
  void WriteHyperparametersAsIs(const nlohmann::json& file) const;
  void WriteResourceConfig(const std::vector<std::string>& hosts, const std::string& current,
                           const std::string& network_interface = "eth0") const;
  // Puts the test child into code/ under `name` (a symlink) or writes a script.
  void InstallChildAs(const std::string& name) const;
  void WriteCode(const std::string& name, const std::string& text, bool executable) const;
  std::filesystem::path base;
  std::filesystem::path markers;
  std::filesystem::path Failure() const { return base / "output" / "failure"; }
};

std::string ReadFile(const std::filesystem::path& file);
bool WaitForFile(const std::filesystem::path& file, std::chrono::milliseconds timeout);

struct Finished {
  int exit_code = -1;  // 128 + signal when the entrypoint itself died of one
  std::chrono::milliseconds elapsed{0};
  std::string out;
  std::string err;
};

// One entrypoint process. Environment: the test's own, minus launcher variables
// (so the host's RANK, SLURM_*, ... cannot leak in), plus `extra_env`.
class EntrypointRun {
 public:
  // `binary`: a copy of the entrypoint elsewhere; default EntrypointBinary().
  EntrypointRun(const std::vector<std::string>& args,
                const std::map<std::string, std::string>& extra_env,
                const std::filesystem::path& output_dir, std::string binary = "");
  ~EntrypointRun();  // SIGKILLs the process group if still running
  EntrypointRun(const EntrypointRun&) = delete;
  EntrypointRun& operator=(const EntrypointRun&) = delete;

  pid_t pid() const { return pid_; }
  void Signal(int signal) const;
  // Waits; on timeout kills the process group and fails the test.
  Finished Wait(std::chrono::milliseconds timeout = std::chrono::seconds(50));

 private:
  pid_t pid_ = -1;
  bool done_ = false;
  std::filesystem::path out_file_;
  std::filesystem::path err_file_;
  std::chrono::steady_clock::time_point start_;
};

// Shorthand: start, wait, return.
Finished RunEntrypoint(const std::vector<std::string>& args,
                       const std::map<std::string, std::string>& extra_env,
                       const std::filesystem::path& output_dir,
                       std::chrono::milliseconds timeout = std::chrono::seconds(50),
                       std::string binary = "");

}  // namespace mrcnn::test
