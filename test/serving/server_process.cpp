#include "test/serving/server_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <catch2/catch.hpp>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

extern char** environ;

namespace mrcnn::serving::testing {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

std::string Lower(std::string s) {
  for (char& c : s) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return s;
}

std::filesystem::path MakeTempDir() {
  std::random_device device;
  for (int attempt = 0; attempt < 100; ++attempt) {
    auto dir =
        std::filesystem::temp_directory_path() / ("mrcnn-serving-test-" + std::to_string(device()));
    if (std::filesystem::create_directory(dir)) {
      return dir;
    }
  }
  throw std::runtime_error("cannot create a temporary directory");
}

}  // namespace

ServerProcess::ServerProcess(const std::vector<std::string>& args,
                             const nlohmann::json& predictor_config,
                             const std::map<std::string, std::string>& env) {
  dir_ = MakeTempDir();
  std::filesystem::create_directory(dir_ / "model");
  std::ofstream(dir_ / "model" / "statistics_predictor.json") << predictor_config.dump();
  std::vector<std::string> argv = {MRCNN_SERVER_BINARY,
                                   "--host",
                                   "127.0.0.1",
                                   "--port",
                                   "0",
                                   "--port-file",
                                   (dir_ / "port").string(),
                                   "--model-dir",
                                   (dir_ / "model").string(),
                                   "--predictor",
                                   "statistics"};
  argv.insert(argv.end(), args.begin(), args.end());
  Start(std::move(argv), env, true);
}

ServerProcess::ServerProcess(const Command& command,
                             const std::map<std::string, std::string>& env) {
  dir_ = MakeTempDir();
  std::vector<std::string> argv = command.argv;
  for (std::string arg : {std::string("--host"), std::string("127.0.0.1"), std::string("--port"),
                          std::string("0"), std::string("--port-file"), (dir_ / "port").string()}) {
    argv.push_back(std::move(arg));
  }
  Start(std::move(argv), env, command.wait_for_port);
}

void ServerProcess::Start(std::vector<std::string> argv_strings,
                          const std::map<std::string, std::string>& env, bool wait_for_port) {
  const auto port_file = dir_ / "port";
  std::map<std::string, std::string> environment;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    const size_t eq = entry.find('=');
    // SAGEMAKER_* and SM_* of whoever runs the tests would pick ports and model dirs.
    if (eq != std::string::npos && entry.rfind("SAGEMAKER_", 0) != 0 &&
        entry.rfind("SM_", 0) != 0) {
      environment[entry.substr(0, eq)] = entry.substr(eq + 1);
    }
  }
  for (const auto& [key, value] : env) {
    environment[key] = value;
  }
  std::vector<std::string> env_strings;
  for (const auto& [key, value] : environment) {
    env_strings.push_back(key + "=" + value);
  }
  std::vector<char*> argv, envp;
  for (auto& s : argv_strings) {
    argv.push_back(s.data());
  }
  argv.push_back(nullptr);
  for (auto& s : env_strings) {
    envp.push_back(s.data());
  }
  envp.push_back(nullptr);
  const std::string out_path = (dir_ / "stdout").string();
  const std::string err_path = (dir_ / "stderr").string();

  pid_ = ::fork();
  REQUIRE(pid_ >= 0);
  if (pid_ == 0) {
    const int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(out, STDOUT_FILENO);
    ::dup2(err, STDERR_FILENO);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  if (!wait_for_port) {
    return;
  }
  const auto give_up = Clock::now() + std::chrono::seconds(20);
  while (Clock::now() < give_up) {
    if (std::filesystem::exists(port_file)) {
      std::ifstream in(port_file);
      int port = 0;
      in >> port;
      port_ = static_cast<uint16_t>(port);
      return;
    }
    if (WaitForExit(std::chrono::milliseconds(0))) {
      FAIL("the server exited before listening: " << Log());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  FAIL("the server did not write its port file within 20 s: " << Log());
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0 && !exit_status_) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

void ServerProcess::WaitUntilReady(std::chrono::milliseconds timeout) {
  const auto give_up = Clock::now() + timeout;
  while (Clock::now() < give_up) {
    try {
      if (Request(port_, "GET", "/ping").status == 200) {
        return;
      }
    } catch (const std::exception&) {
    }
    REQUIRE_FALSE(WaitForExit(std::chrono::milliseconds(0)));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  FAIL("/ping never answered 200: " << Log());
}

void ServerProcess::Signal(int signal) const {
  ::kill(pid_, signal);
}

std::optional<int> ServerProcess::WaitForExit(std::chrono::milliseconds timeout) {
  const auto give_up = Clock::now() + timeout;
  while (!exit_status_) {
    int status = 0;
    const pid_t done = ::waitpid(pid_, &status, WNOHANG);
    if (done == pid_) {
      exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
      break;
    }
    if (Clock::now() >= give_up) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return exit_status_;
}

std::string ServerProcess::Log() const {
  std::ifstream in(dir_ / "stderr");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

struct HttpConnection::Impl {
  net::io_context ioc;
  beast::tcp_stream stream{ioc};
  beast::flat_buffer buffer;
};

HttpConnection::HttpConnection(uint16_t port) : impl_(new Impl) {
  impl_->stream.expires_after(std::chrono::seconds(10));
  impl_->stream.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port));
}

HttpConnection::~HttpConnection() {
  beast::error_code ignored;
  impl_->stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  delete impl_;
}

HttpReply HttpConnection::Send(const std::string& method, const std::string& target,
                               const std::string& body,
                               const std::map<std::string, std::string>& headers,
                               std::chrono::milliseconds timeout) {
  http::request<http::string_body> request{http::string_to_verb(method), target, 11};
  request.set(http::field::host, "127.0.0.1");
  for (const auto& [name, value] : headers) {
    request.set(name, value);
  }
  request.body() = body;
  if (!body.empty() || method == "POST") {
    request.prepare_payload();
  }
  impl_->stream.expires_after(timeout);
  http::write(impl_->stream, request);
  http::response_parser<http::string_body> parser;
  parser.body_limit(256 << 20);
  http::read(impl_->stream, impl_->buffer, parser);
  auto response = parser.release();
  HttpReply reply;
  reply.status = response.result_int();
  for (const auto& field : response) {
    reply.headers[Lower(std::string(field.name_string()))] = std::string(field.value());
  }
  reply.body = std::move(response.body());
  reply.keep_alive = response.keep_alive();
  return reply;
}

HttpReply Request(uint16_t port, const std::string& method, const std::string& target,
                  const std::string& body, const std::map<std::string, std::string>& headers) {
  HttpConnection connection(port);
  return connection.Send(method, target, body, headers);
}

RawConnection::RawConnection(uint16_t port) {
  fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd_ >= 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0);
}

RawConnection::~RawConnection() {
  ::close(fd_);
}

bool RawConnection::TryWrite(const std::string& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) {
      return false;
    }
    sent += static_cast<size_t>(n);
  }
  return true;
}

void RawConnection::Write(const std::string& bytes) {
  if (!TryWrite(bytes)) {
    throw std::runtime_error("send failed");
  }
}

std::string RawConnection::ReadUntilClosed(std::chrono::milliseconds timeout, bool* closed) {
  const auto give_up = Clock::now() + timeout;
  std::string received = std::move(pending_);
  pending_.clear();
  if (closed) {
    *closed = false;
  }
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(give_up - Clock::now());
    if (left.count() <= 0) {
      return received;
    }
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) {
      return received;
    }
    char chunk[65536];
    const ssize_t n = ::recv(fd_, chunk, sizeof(chunk), 0);
    if (n <= 0) {
      if (closed) {
        *closed = true;
      }
      return received;
    }
    received.append(chunk, static_cast<size_t>(n));
  }
}

HttpReply RawConnection::ReadResponse(std::chrono::milliseconds timeout) {
  const auto give_up = Clock::now() + timeout;
  std::string data = std::move(pending_);
  pending_.clear();
  auto fill = [&]() {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(give_up - Clock::now());
    pollfd p{fd_, POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) {
      throw std::runtime_error("timed out reading a response; got: " + data);
    }
    char chunk[65536];
    const ssize_t n = ::recv(fd_, chunk, sizeof(chunk), 0);
    if (n <= 0) {
      throw std::runtime_error("connection closed before a full response; got: " + data);
    }
    data.append(chunk, static_cast<size_t>(n));
  };
  size_t header_end;
  while ((header_end = data.find("\r\n\r\n")) == std::string::npos) {
    fill();
  }
  HttpReply reply;
  std::istringstream lines(data.substr(0, header_end));
  std::string line;
  std::getline(lines, line);
  reply.status = static_cast<unsigned>(std::stoi(line.substr(9, 3)));
  while (std::getline(lines, line)) {
    if (!line.empty() && line.back() == '\r') {
      line.pop_back();
    }
    const size_t colon = line.find(':');
    if (colon != std::string::npos) {
      std::string value = line.substr(colon + 1);
      value.erase(0, value.find_first_not_of(' '));
      reply.headers[Lower(line.substr(0, colon))] = value;
    }
  }
  const size_t length =
      std::stoul(reply.Header("content-length").empty() ? "0" : reply.Header("content-length"));
  while (data.size() < header_end + 4 + length) {
    fill();
  }
  reply.body = data.substr(header_end + 4, length);
  pending_ = data.substr(header_end + 4 + length);
  reply.keep_alive = Lower(reply.Header("connection")) != "close";
  return reply;
}

}  // namespace mrcnn::serving::testing
