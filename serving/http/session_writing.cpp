// HttpSession, writing: the answer with the exchange's headers, keep-alive unless the request,
// an early refusal or the drain says otherwise; then the next request, or a close that first
// discards what the client may still be sending.
#include "serving/http/log_line.h"
#include "serving/http/session.h"

namespace mrcnn::serving {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace net = boost::asio;

void HttpSession::RespondError(unsigned status, const std::string& code,
                               const std::string& detail) {
  Send(ErrorAnswer(status, code, detail));
}

void HttpSession::Send(RouteAnswer answer) {
  phase_ = Phase::kWriting;
  if (state_->metrics != nullptr) {
    // Counted before the bytes leave: a client that has its answer finds it counted.
    state_->metrics->CountAnswer(
        method_, route_, answer.status,
        std::chrono::duration<double>(Clock::now() - request_start_).count());
  }
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
  stream_.expires_after(timeouts_.Write(response_.body().size()));
  http::async_write(stream_, response_,
                    [self = shared_from_this()](beast::error_code ec, size_t bytes) {
                      self->OnWrite(ec, bytes);
                    });
}

void HttpSession::OnWrite(beast::error_code ec, size_t bytes) {
  if (state_->config.access_log) {
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
void HttpSession::LingeringClose() {
  phase_ = Phase::kClosed;
  beast::error_code ignored;
  stream_.socket().shutdown(net::ip::tcp::socket::shutdown_send, ignored);
  linger_until_ = Clock::now() + SessionTimeouts::kLinger;
  discard_.resize(16 * 1024);
  Discard();
}

void HttpSession::Discard() {
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

void HttpSession::Close() {
  phase_ = Phase::kClosed;
  beast::error_code ignored;
  stream_.socket().shutdown(net::ip::tcp::socket::shutdown_both, ignored);
  stream_.close();
}

}  // namespace mrcnn::serving
