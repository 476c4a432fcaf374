#include "process_harness.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

extern char** environ;

namespace mrcnn::test {
namespace fs = std::filesystem;

std::string EntrypointBinary() {
  return MRCNN_ENTRYPOINT_BIN;
}
std::string ChildBinary() {
  return MRCNN_TEST_CHILD_BIN;
}

TempDir::TempDir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/mrcnn-entrypoint-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr)
    throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

static void WriteText(const fs::path& file, const std::string& text);

JobTree::JobTree(const fs::path& dir) : base(dir / "ml"), markers(dir / "markers") {
  for (const char* sub : {"input/config", "input/data/train", "code", "output", "model"}) {
    fs::create_directories(base / sub);
  }
  fs::create_directories(markers);
  WriteText(base / "input/config/inputdataconfig.json",
            R"({"train":{"ContentType":"application/json","TrainingInputMode":"File",)"
            R"("S3DistributionType":"FullyReplicated","RecordWrapperType":"None"}})");
}

static void WriteText(const fs::path& file, const std::string& text) {
  std::ofstream out(file, std::ios::binary);
  out << text;
}

void JobTree::WriteHyperparameters(const nlohmann::json& values) const {
  nlohmann::json encoded = nlohmann::json::object();
  for (auto& [key, value] : values.items())
    encoded[key] = value.dump();
  WriteText(base / "input/config/hyperparameters.json", encoded.dump());
}

void JobTree::WriteHyperparametersAsIs(const nlohmann::json& file) const {
  WriteText(base / "input/config/hyperparameters.json", file.dump());
}

void JobTree::WriteResourceConfig(const std::vector<std::string>& hosts, const std::string& current,
                                  const std::string& network_interface) const {
  nlohmann::json config = {{"current_host", current},
                           {"current_instance_type", "ml.c5.xlarge"},
                           {"current_group_name", "homogeneousCluster"},
                           {"hosts", hosts},
                           {"network_interface_name", network_interface}};
  WriteText(base / "input/config/resourceconfig.json", config.dump());
}

void JobTree::InstallChildAs(const std::string& name) const {
  fs::create_symlink(ChildBinary(), base / "code" / name);
}

void JobTree::WriteCode(const std::string& name, const std::string& text, bool executable) const {
  WriteText(base / "code" / name, text);
  if (executable)
    chmod((base / "code" / name).c_str(), 0755);
}

std::string ReadFile(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool WaitForFile(const fs::path& file, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (fs::exists(file))
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return fs::exists(file);
}

static bool IsLauncherVariable(const std::string& key) {
  for (const char* prefix :
       {"PET_", "SLURM_", "OMPI_", "SM_", "SAGEMAKER_", "MRCNN_", "TORCHELASTIC_"}) {
    if (key.rfind(prefix, 0) == 0)
      return true;
  }
  for (const char* name : {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                           "MASTER_ADDR", "MASTER_PORT", "TRAINING_JOB_NAME"}) {
    if (key == name)
      return true;
  }
  return false;
}

EntrypointRun::EntrypointRun(const std::vector<std::string>& args,
                             const std::map<std::string, std::string>& extra_env,
                             const fs::path& output_dir, std::string binary)
    : out_file_(output_dir / "entrypoint.out"), err_file_(output_dir / "entrypoint.err") {
  std::map<std::string, std::string> env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string text = *entry;
    const auto eq = text.find('=');
    if (eq == std::string::npos || IsLauncherVariable(text.substr(0, eq)))
      continue;
    env[text.substr(0, eq)] = text.substr(eq + 1);
  }
  for (const auto& [key, value] : extra_env)
    env[key] = value;
  std::vector<std::string> env_strings;
  for (const auto& [key, value] : env)
    env_strings.push_back(key + "=" + value);
  std::vector<char*> envp;
  for (auto& entry : env_strings)
    envp.push_back(entry.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_strings = {binary.empty() ? EntrypointBinary() : binary};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& arg : argv_strings)
    argv.push_back(arg.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, out_file_.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_addopen(&actions, 2, err_file_.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Its own group, so cleanup can take everything it started with it.
  posix_spawnattr_setpgroup(&attr, 0);
  sigset_t empty;
  sigemptyset(&empty);
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK);
  start_ = std::chrono::steady_clock::now();
  const int rc = posix_spawn(&pid_, argv[0], &actions, &attr, argv.data(), envp.data());
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0)
    throw std::runtime_error("cannot start " + argv_strings.front());
}

EntrypointRun::~EntrypointRun() {
  if (!done_ && pid_ > 0) {
    kill(-pid_, SIGKILL);
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

void EntrypointRun::Signal(int signal) const {
  kill(pid_, signal);
}

Finished EntrypointRun::Wait(std::chrono::milliseconds timeout) {
  Finished result;
  const auto deadline = start_ + timeout;
  int status = 0;
  for (;;) {
    const pid_t rc = waitpid(pid_, &status, WNOHANG);
    if (rc == pid_)
      break;
    if (std::chrono::steady_clock::now() >= deadline) {
      kill(-pid_, SIGKILL);
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      done_ = true;
      FAIL("entrypoint did not finish within " << timeout.count() << " ms; stderr:\n"
                                               << ReadFile(err_file_));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  done_ = true;
  result.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start_);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.out = ReadFile(out_file_);
  result.err = ReadFile(err_file_);
  return result;
}

Finished RunEntrypoint(const std::vector<std::string>& args,
                       const std::map<std::string, std::string>& extra_env,
                       const fs::path& output_dir, std::chrono::milliseconds timeout,
                       std::string binary) {
  EntrypointRun run(args, extra_env, output_dir, std::move(binary));
  return run.Wait(timeout);
}

}  // namespace mrcnn::test
