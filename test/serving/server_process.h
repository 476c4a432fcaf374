#pragma once
// Test harness: a real build/bin/server process on 127.0.0.1 with an ephemeral port, and
// small HTTP clients (Beast for well-formed requests, a raw socket for malformed or slow
// ones). Every process started is killed and reaped by the destructor.
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace mrcnn::serving::testing {

struct HttpReply {
  unsigned status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  bool keep_alive = false;
  std::string Header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? std::string() : it->second;
  }
};

class ServerProcess {
 public:
  // Starts the server with --predictor statistics on a temporary model dir holding
  // statistics_predictor.json = predictor_config, plus `args`, with `env` added to ours.
  ServerProcess(const std::vector<std::string>& args, const nlohmann::json& predictor_config,
                const std::map<std::string, std::string>& env = {});
  // Runs `argv` (e.g. `entrypoint serve --server ...`) followed by --host 127.0.0.1 --port 0
  // --port-file, so the command line and `env` alone decide the model dir. With
  // `wait_for_port` false it returns at once, for servers expected to exit before listening.
  struct Command {
    std::vector<std::string> argv;
    bool wait_for_port = true;
  };
  ServerProcess(const Command& command, const std::map<std::string, std::string>& env);
  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  uint16_t port() const { return port_; }
  pid_t pid() const { return pid_; }
  // Polls GET /ping until 200. Fails the test after `timeout`.
  void WaitUntilReady(std::chrono::milliseconds timeout = std::chrono::seconds(20));
  void Signal(int signal) const;
  // Exit status once the process ended, nullopt after `timeout` (-signal if killed).
  std::optional<int> WaitForExit(std::chrono::milliseconds timeout);
  std::string Log() const;  // stderr so far

 private:
  void Start(std::vector<std::string> argv, const std::map<std::string, std::string>& env,
             bool wait_for_port);

  std::filesystem::path dir_;
  pid_t pid_ = -1;
  uint16_t port_ = 0;
  std::optional<int> exit_status_;
};

// One keep-alive connection.
class HttpConnection {
 public:
  explicit HttpConnection(uint16_t port);
  ~HttpConnection();
  HttpReply Send(const std::string& method, const std::string& target, const std::string& body = {},
                 const std::map<std::string, std::string>& headers = {},
                 std::chrono::milliseconds timeout = std::chrono::seconds(30));

 private:
  struct Impl;
  Impl* impl_;
};

// A one-shot request on a fresh connection.
HttpReply Request(uint16_t port, const std::string& method, const std::string& target,
                  const std::string& body = {},
                  const std::map<std::string, std::string>& headers = {});

// A plain TCP connection for byte-level control.
class RawConnection {
 public:
  explicit RawConnection(uint16_t port);
  ~RawConnection();
  void Write(const std::string& bytes);  // throws when the peer is gone
  bool TryWrite(const std::string& bytes);
  // Reads until the peer closes or `timeout` passes; returns what arrived.
  std::string ReadUntilClosed(std::chrono::milliseconds timeout, bool* closed = nullptr);
  // Reads one HTTP response (headers + Content-Length body).
  HttpReply ReadResponse(std::chrono::milliseconds timeout);

 private:
  int fd_ = -1;
  std::string pending_;
};

}  // namespace mrcnn::serving::testing
