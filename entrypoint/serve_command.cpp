#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "common/env_map.h"
#include "entrypoint/commands.h"
#include "entrypoint/fd_io.h"
#include "entrypoint/program.h"

namespace mrcnn::entrypoint {
namespace fs = std::filesystem;

// `entrypoint serve [--server PATH] [args...]`: the server is found at
// --server, then $MRCNN_SERVER, then `server` next to this binary, then
// /usr/local/bin/server. The model dir (--model-dir, SM_MODEL_DIR, --base-dir,
// SAGEMAKER_BASE_DIR) is left to the server, so `server` run by itself follows
// the same rule.
bool IsKServeServerArgument(std::string_view arg) {
  const std::string_view name = arg.substr(0, arg.find('='));
  for (const std::string_view option :
       {"--model_name", "--model-name", "--model_dir", "--model-dir", "--http_port"}) {
    if (name == option) {
      return true;
    }
  }
  return false;
}

int ExecServer(const std::vector<std::string>& args) {
  std::vector<std::string> rest = args;
  std::string server;
  std::string tried;
  if (!rest.empty() && rest.front().rfind("--server=", 0) == 0) {
    server = rest.front().substr(9);
    rest.erase(rest.begin());
  } else if (rest.size() >= 2 && rest.front() == "--server") {
    server = rest[1];
    rest.erase(rest.begin(), rest.begin() + 2);
  }
  if (server.empty()) {
    const auto env = common::CurrentEnvironment();
    std::vector<std::string> candidates;
    if (auto value = common::Lookup(env, "MRCNN_SERVER"); value && !value->empty()) {
      candidates.push_back(*value);
    } else {
      candidates = {(SelfDirectory() / "server").string(), "/usr/local/bin/server"};
    }
    for (const auto& candidate : candidates) {
      tried += (tried.empty() ? "" : ", ") + candidate;
      if (access(candidate.c_str(), X_OK) == 0) {
        server = candidate;
        break;
      }
    }
    if (server.empty()) {
      LogLine(
          fmt::format("serve: no executable server found (tried {}); build it with "
                      "scripts/setup.sh, or pass --server PATH or set MRCNN_SERVER",
                      tried));
      return 127;
    }
  }
  std::vector<char*> argv;
  argv.push_back(server.data());
  for (auto& arg : rest)
    argv.push_back(arg.data());
  argv.push_back(nullptr);
  execv(server.c_str(), argv.data());
  LogLine(fmt::format("serve: cannot execute {}: {}", server, std::strerror(errno)));
  return 127;
}

}  // namespace mrcnn::entrypoint
