#include "serving/http/http_server.h"

#include <fmt/format.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <csignal>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include "serving/http_error.h"
#include "serving/log_line.h"

namespace mrcnn::serving {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

constexpr size_t kHeaderLimit = 16 * 1024;
constexpr auto kLingerTime = std::chrono::seconds(2);

class Session;

}  // namespace

struct HttpServer::State : std::enable_shared_from_this<HttpServer::State> {
  State(const HttpOptions& options, const RouteTable& route_table,
        ServerLifecycle& server_lifecycle)
      : config(options),
        routes(route_table),
        lifecycle(server_lifecycle),
        ioc(config.io_threads),
        acceptor(net::make_strand(ioc)),
        signals(ioc, SIGTERM, SIGINT),
        drain_timer(ioc),
        accept_retry(acceptor.get_executor()) {}

  void DoAccept();
  void WaitForSignal();
  void BeginDrain();
  void PollDrain();

  void Register(Session* session, std::weak_ptr<Session> weak) {
    std::lock_guard lock(sessions_mutex);
    sessions.emplace(session, std::move(weak));
  }
  void Unregister(Session* session) {
    std::lock_guard lock(sessions_mutex);
    sessions.erase(session);
  }
  size_t SessionCount() {
    std::lock_guard lock(sessions_mutex);
    return sessions.size();
  }

  const HttpOptions config;
  const RouteTable& routes;
  ServerLifecycle& lifecycle;
  net::io_context ioc;
  tcp::acceptor acceptor;
  net::signal_set signals;
  net::steady_timer drain_timer;
  net::steady_timer accept_retry;
  Clock::time_point drain_deadline;
  std::atomic<bool> drained_cleanly{true};
  std::mutex sessions_mutex;
  std::unordered_map<Session*, std::weak_ptr<Session>> sessions;
};

namespace {

// The time a transfer of `bytes` may take: the base timeout plus the bytes at the minimum
// rate, so that large bodies and responses are limited by a rate rather than cut off.
std::chrono::milliseconds TransferTime(std::chrono::milliseconds base, uint64_t bytes,
                                       double bytes_per_second) {
  return base + std::chrono::milliseconds(
                    static_cast<int64_t>(static_cast<double>(bytes) / bytes_per_second * 1000.0));
}

class Session : public std::enable_shared_from_this<Session> {
 public:
  // state_ is declared first so that it is destroyed last: the io_context it owns must
  // outlive this session's socket and timer.
  Session(std::shared_ptr<HttpServer::State> state, tcp::socket socket)
      : state_(std::move(state)),
        stream_(std::move(socket)),
        deadline_timer_(stream_.get_executor()) {}

  ~Session() { state_->Unregister(this); }

  void Start() {
    state_->Register(this, weak_from_this());
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->WaitForRequest(); });
  }

  net::any_io_executor Executor() { return stream_.get_executor(); }

  // Called (posted) on this session's strand when the server starts draining.
  void OnDrain() {
    if (phase_ == Phase::kIdle) {
      Close();  // nothing received yet: the pending read ends with operation_aborted
    }
  }

 private:
  enum class Phase { kIdle, kReadingHeader, kReadingBody, kProcessing, kWriting, kClosed };
  using Parser = http::request_parser<http::vector_body<uint8_t>>;

  const HttpOptions& config() const { return state_->config; }

  void WaitForRequest() {
    phase_ = Phase::kIdle;
    if (state_->lifecycle.Draining()) {
      Close();
      return;
    }
    parser_.emplace();
    parser_->header_limit(kHeaderLimit);
    parser_->body_limit(config().max_payload_bytes);
    awaiting_result_ = false;
    pending_error_.reset();
    exchange_.reset();
    close_after_response_ = false;
    unread_input_ = false;
    version_ = 11;
    request_keep_alive_ = true;
    method_ = "-";
    target_ = "-";
    if (buffer_.size() > 0) {
      ReadHeader();  // a pipelined request is already here
      return;
    }
    // Keep-alive idle time is separate from the header time: wait for the first byte.
    stream_.expires_after(config().idle_timeout);
    stream_.async_read_some(buffer_.prepare(4096),
                            [self = shared_from_this()](beast::error_code ec, size_t bytes) {
                              self->OnFirstBytes(ec, bytes);
                            });
  }

  void OnFirstBytes(beast::error_code ec, size_t bytes) {
    if (ec) {
      Close();  // idle timeout, client closed, or drained
      return;
    }
    buffer_.commit(bytes);
    ReadHeader();
  }

  void ReadHeader() {
    phase_ = Phase::kReadingHeader;
    request_start_ = Clock::now();
    stream_.expires_after(config().header_timeout);
    http::async_read_header(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->OnHeader(ec); });
  }

  bool HasBody() const {
    return parser_->chunked() || (parser_->content_length() && *parser_->content_length() > 0);
  }

  void OnHeader(beast::error_code ec) {
    if (ec == http::error::body_limit) {
      RespondPayloadTooLarge();
      return;
    }
    if (ec == http::error::header_limit) {
      unread_input_ = true;
      close_after_response_ = true;
      RespondError(431, "headers_too_large",
                   fmt::format("the request headers exceed {} bytes", kHeaderLimit));
      return;
    }
    if (ec && ec.category() == http::make_error_code(http::error::bad_target).category() &&
        ec != http::error::partial_message && ec != http::error::end_of_stream) {
      unread_input_ = true;
      close_after_response_ = true;
      RespondError(400, "bad_request", fmt::format("malformed HTTP request: {}", ec.message()));
      return;
    }
    if (ec) {
      Close();  // header timeout (a slow client), reset, or end of stream
      return;
    }
    const auto& request = parser_->get();
    version_ = request.version();
    request_keep_alive_ = request.keep_alive();
    method_ = std::string(request.method_string());
    const std::string_view full_target(request.target().data(), request.target().size());
    target_ = std::string(full_target.substr(0, full_target.find('?')));
    const bool expects_continue = beast::iequals(request[http::field::expect], "100-continue");
    try {
      RouteTable::Match match = state_->routes.Resolve(request.method(), target_);
      const RequestHead head{request.method(), target_, std::move(match.params), request,
                             request_start_};
      exchange_.emplace((*match.handler)(head));
    } catch (const HttpError& e) {
      if (expects_continue && HasBody()) {
        // The client waits for our go-ahead: answer now, it will not send the body.
        unread_input_ = true;
        close_after_response_ = true;
        Send(ErrorAnswer(e));
        return;
      }
      // Read (at most the payload limit of) the body first so the connection stays usable.
      pending_error_.emplace(e);
    }
    if (expects_continue && !pending_error_) {
      // curl and others wait for this before sending a body over 1 MB.
      auto interim =
          std::make_shared<http::response<http::empty_body>>(http::status::continue_, version_);
      stream_.expires_after(config().write_timeout);
      http::async_write(stream_, *interim,
                        [self = shared_from_this(), interim](beast::error_code write_ec, size_t) {
                          if (write_ec) {
                            self->Close();
                            return;
                          }
                          self->ReadBody();
                        });
      return;
    }
    ReadBody();
  }

  void ReadBody() {
    phase_ = Phase::kReadingBody;
    if (parser_->is_done()) {
      OnBody({});
      return;
    }
    const uint64_t length = parser_->content_length().value_or(config().max_payload_bytes);
    stream_.expires_after(
        TransferTime(config().body_timeout, length, config().min_transfer_bytes_per_s));
    http::async_read(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->OnBody(ec); });
  }

  void OnBody(beast::error_code ec) {
    if (ec == http::error::body_limit) {
      RespondPayloadTooLarge();
      return;
    }
    if (ec) {
      Close();  // body timeout, reset or a truncated body
      return;
    }
    if (pending_error_) {
      const HttpError error = std::move(*pending_error_);
      pending_error_.reset();
      Send(ErrorAnswer(error));
      return;
    }
    phase_ = Phase::kProcessing;
    awaiting_result_ = true;
    const uint64_t id = request_id_;
    if (exchange_->deadline) {
      deadline_timer_.expires_at(*exchange_->deadline);
      deadline_timer_.async_wait([self = shared_from_this(), id](beast::error_code timer_ec) {
        if (!timer_ec) {
          self->OnDeadline(id);
        }
      });
    }
    stream_.expires_never();  // the route, and its deadline, own this phase
    exchange_->run(parser_->release().body(), [self = shared_from_this(), id](RouteAnswer answer) {
      self->Deliver(id, std::move(answer));
    });
  }

  void RespondPayloadTooLarge() {
    unread_input_ = true;
    close_after_response_ = true;
    // Not parser_->content_length(): its precondition is a finished header, and Beast stops
    // before finishing one whose Content-Length is over the limit. The field is stored by then.
    const auto declared = parser_->get()[http::field::content_length];
    const std::string size = declared.empty() ? "more bytes" : fmt::format("{} bytes", declared);
    RespondError(413, "payload_too_large",
                 fmt::format("the request body has {}; the limit is {} bytes ({:.3g} MiB, "
                             "SAGEMAKER_MAX_PAYLOAD_IN_MB or --max-payload-mb). Send a smaller "
                             "or more compressed image",
                             size, config().max_payload_bytes,
                             static_cast<double>(config().max_payload_bytes) / (1 << 20)));
  }

  // Any thread: hands a finished answer to the session's strand.
  void Deliver(uint64_t id, RouteAnswer answer) {
    net::post(stream_.get_executor(),
              [self = shared_from_this(), id, answer = std::move(answer)]() mutable {
                if (id != self->request_id_ || !self->awaiting_result_) {
                  return;  // already answered by the deadline
                }
                self->awaiting_result_ = false;
                self->deadline_timer_.cancel();
                self->Send(std::move(answer));
              });
  }

  void OnDeadline(uint64_t id) {
    if (id != request_id_ || !awaiting_result_) {
      return;
    }
    awaiting_result_ = false;
    Send(exchange_->deadline_answer);
  }

  void RespondError(unsigned status, const std::string& code, const std::string& detail) {
    Send(ErrorAnswer(status, code, detail));
  }

  void Send(RouteAnswer answer) {
    phase_ = Phase::kWriting;
    response_ = {};
    response_.version(version_);
    response_.result(static_cast<http::status>(answer.status));
    response_.set(http::field::server, "mrcnn-serving");
    if (!answer.content_type.empty()) {
      response_.set(http::field::content_type, answer.content_type);
    }
    if (exchange_) {
      for (const auto& [name, value] : exchange_->headers) {
        response_.set(name, value);
      }
    }
    for (const auto& [name, value] : answer.headers) {
      response_.set(name, value);
    }
    response_.body() = std::move(answer.body);
    response_.keep_alive(request_keep_alive_ && !close_after_response_ &&
                         !state_->lifecycle.Draining());
    response_.prepare_payload();
    stream_.expires_after(TransferTime(config().write_timeout, response_.body().size(),
                                       config().min_transfer_bytes_per_s));
    http::async_write(stream_, response_,
                      [self = shared_from_this()](beast::error_code ec, size_t bytes) {
                        self->OnWrite(ec, bytes);
                      });
  }

  void OnWrite(beast::error_code ec, size_t bytes) {
    if (config().access_log) {
      LogLine("{} {} {} {}B {:.1f}ms", method_, target_, response_.result_int(), bytes,
              std::chrono::duration<double, std::milli>(Clock::now() - request_start_).count());
    }
    if (ec) {
      Close();
      return;
    }
    if (!response_.keep_alive()) {
      if (unread_input_) {
        LingeringClose();
      } else {
        Close();
      }
      return;
    }
    ++request_id_;
    WaitForRequest();
  }

  // After an early answer the client may still be sending: closing with unread data would
  // reset the connection and could destroy the response in flight. Stop sending, discard
  // (never buffer) what arrives for a short while, then close.
  void LingeringClose() {
    phase_ = Phase::kClosed;
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    linger_until_ = Clock::now() + kLingerTime;
    discard_.resize(16 * 1024);
    Discard();
  }

  void Discard() {
    stream_.expires_at(linger_until_);
    stream_.async_read_some(net::buffer(discard_),
                            [self = shared_from_this()](beast::error_code ec, size_t) {
                              if (ec) {
                                self->Close();
                                return;
                              }
                              self->Discard();
                            });
  }

  void Close() {
    phase_ = Phase::kClosed;
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
  }

  std::shared_ptr<HttpServer::State> state_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<Parser> parser_;
  std::optional<HttpError> pending_error_;  // answered once the body has been read
  std::optional<Exchange> exchange_;        // the route's part of the current request
  http::response<http::string_body> response_;
  net::steady_timer deadline_timer_;
  Phase phase_ = Phase::kIdle;
  uint64_t request_id_ = 0;
  bool awaiting_result_ = false;
  bool close_after_response_ = false;
  bool unread_input_ = false;
  bool request_keep_alive_ = true;
  unsigned version_ = 11;
  std::string method_;
  std::string target_;
  Clock::time_point request_start_;
  Clock::time_point linger_until_;
  std::vector<char> discard_;
};

}  // namespace

void HttpServer::State::DoAccept() {
  acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
    if (!acceptor.is_open() || ec == net::error::operation_aborted) {
      return;  // draining
    }
    if (ec) {
      // Typically EMFILE: back off instead of spinning on the error.
      LogLine("accept failed: {}; retrying in 50 ms", ec.message());
      accept_retry.expires_after(std::chrono::milliseconds(50));
      accept_retry.async_wait([this](beast::error_code) { DoAccept(); });
      return;
    }
    beast::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    // The State is owned by HttpServer through a shared_ptr; sessions co-own it.
    std::make_shared<Session>(shared_from_this(), std::move(socket))->Start();
    DoAccept();
  });
}

void HttpServer::State::WaitForSignal() {
  signals.async_wait([this](beast::error_code ec, int signal) {
    if (ec) {
      return;
    }
    if (lifecycle.Draining()) {
      LogLine("signal {} again while draining: stopping now", signal);
      drained_cleanly = false;
      ioc.stop();
      return;
    }
    LogLine(
        "signal {}: draining (no new connections, finishing in-flight requests, at most {} "
        "ms)",
        signal, config.drain_timeout.count());
    BeginDrain();
    WaitForSignal();
  });
}

void HttpServer::State::BeginDrain() {
  if (!lifecycle.StartDraining()) {
    return;
  }
  net::post(acceptor.get_executor(), [this] {
    beast::error_code ignored;
    acceptor.close(ignored);
    accept_retry.cancel();
  });
  std::vector<std::shared_ptr<Session>> live;
  {
    std::lock_guard lock(sessions_mutex);
    for (auto& [raw, weak] : sessions) {
      if (auto session = weak.lock()) {
        live.push_back(std::move(session));
      }
    }
  }
  for (auto& session : live) {
    net::post(session->Executor(), [session] { session->OnDrain(); });
  }
  net::post(ioc, [this] {
    drain_deadline = Clock::now() + config.drain_timeout;
    PollDrain();
  });
}

void HttpServer::State::PollDrain() {
  if (SessionCount() == 0 && lifecycle.InFlight() == 0) {
    LogLine("drained: every in-flight request finished");
    ioc.stop();
    return;
  }
  if (Clock::now() >= drain_deadline) {
    LogLine("drain timeout: {} connections and {} requests still in flight are cut off",
            SessionCount(), lifecycle.InFlight());
    drained_cleanly = false;
    ioc.stop();
    return;
  }
  drain_timer.expires_after(std::chrono::milliseconds(10));
  drain_timer.async_wait([this](beast::error_code ec) {
    if (!ec) {
      PollDrain();
    }
  });
}

HttpServer::HttpServer(const HttpOptions& options, const RouteTable& routes,
                       ServerLifecycle& lifecycle)
    : state_(std::make_shared<State>(options, routes, lifecycle)) {}

HttpServer::~HttpServer() {
  state_->ioc.stop();
}

uint16_t HttpServer::Listen() {
  auto& acceptor = state_->acceptor;
  const tcp::endpoint endpoint(net::ip::make_address(state_->config.host), state_->config.port);
  acceptor.open(endpoint.protocol());
  acceptor.set_option(net::socket_base::reuse_address(true));
  acceptor.bind(endpoint);
  acceptor.listen(net::socket_base::max_listen_connections);
  return acceptor.local_endpoint().port();
}

bool HttpServer::Run() {
  std::signal(SIGPIPE, SIG_IGN);
  state_->DoAccept();
  state_->WaitForSignal();
  std::vector<std::thread> threads;
  for (int i = 1; i < state_->config.io_threads; ++i) {
    threads.emplace_back([this] { state_->ioc.run(); });
  }
  state_->ioc.run();
  for (auto& thread : threads) {
    thread.join();
  }
  return state_->drained_cleanly.load();
}

void HttpServer::BeginDrain() {
  state_->BeginDrain();
}

}  // namespace mrcnn::serving
