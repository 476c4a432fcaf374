// HttpSession, reading: wait for a request (keep-alive idle time apart from header time),
// read its headers, hand them to admission, then read the body (within the payload limit).
#include "serving/http/session.h"

namespace mrcnn::serving {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace net = boost::asio;

HttpSession::HttpSession(std::shared_ptr<HttpServer::State> state, net::ip::tcp::socket socket)
    : state_(std::move(state)),
      timeouts_(state_->config),
      stream_(std::move(socket)),
      deadline_timer_(stream_.get_executor()) {}

HttpSession::~HttpSession() {
  state_->Unregister(this);
}

void HttpSession::Start() {
  state_->Register(this, weak_from_this());
  net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->WaitForRequest(); });
}

void HttpSession::OnDrain() {
  if (phase_ == Phase::kIdle) {
    Close();  // nothing received yet: the pending read ends with operation_aborted
  }
}

void HttpSession::WaitForRequest() {
  phase_ = Phase::kIdle;
  if (state_->lifecycle.Draining()) {
    Close();
    return;
  }
  parser_.emplace();
  parser_->header_limit(kHeaderLimit);
  parser_->body_limit(state_->config.max_payload_bytes);
  awaiting_result_ = false;
  pending_error_.reset();
  exchange_.reset();
  close_after_response_ = false;
  unread_input_ = false;
  version_ = 11;
  request_keep_alive_ = true;
  // "-" until the headers are in (the access log's placeholder). Not `= "-"`: GCC 12 at -O3
  // misreports that assignment as an overlapping memcpy (-Wrestrict, GCC bug 105651).
  method_ = std::string(1, '-');
  target_ = std::string(1, '-');
  route_ = kUnmatchedRoute;
  if (buffer_.size() > 0) {
    ReadHeader();  // a pipelined request is already here
    return;
  }
  // Keep-alive idle time is separate from the header time: wait for the first byte.
  stream_.expires_after(timeouts_.Idle());
  stream_.async_read_some(buffer_.prepare(4096),
                          [self = shared_from_this()](beast::error_code ec, size_t bytes) {
                            self->OnFirstBytes(ec, bytes);
                          });
}

void HttpSession::OnFirstBytes(beast::error_code ec, size_t bytes) {
  if (ec) {
    Close();  // idle timeout, client closed, or drained
    return;
  }
  buffer_.commit(bytes);
  ReadHeader();
}

void HttpSession::ReadHeader() {
  phase_ = Phase::kReadingHeader;
  request_start_ = Clock::now();
  stream_.expires_after(timeouts_.Header());
  http::async_read_header(
      stream_, buffer_, *parser_,
      [self = shared_from_this()](beast::error_code ec, size_t) { self->OnHeader(ec); });
}

bool HttpSession::HasBody() const {
  return parser_->chunked() || (parser_->content_length() && *parser_->content_length() > 0);
}

void HttpSession::OnHeader(beast::error_code ec) {
  if (ec == http::error::body_limit) {
    RespondPayloadTooLarge();
    return;
  }
  if (ec == http::error::header_limit) {
    RefuseHeadersTooLarge();
    return;
  }
  if (ec && ec.category() == http::make_error_code(http::error::bad_target).category() &&
      ec != http::error::partial_message && ec != http::error::end_of_stream) {
    RefuseMalformed(ec);
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
  Admit(beast::iequals(request[http::field::expect], "100-continue"));
}

void HttpSession::ReadBody() {
  phase_ = Phase::kReadingBody;
  if (parser_->is_done()) {
    OnBody({});
    return;
  }
  const uint64_t length = parser_->content_length().value_or(state_->config.max_payload_bytes);
  stream_.expires_after(timeouts_.Body(length));
  http::async_read(stream_, buffer_, *parser_,
                   [self = shared_from_this()](beast::error_code ec, size_t) { self->OnBody(ec); });
}

void HttpSession::OnBody(beast::error_code ec) {
  if (ec == http::error::body_limit) {
    RespondPayloadTooLarge();
    return;
  }
  if (ec) {
    Close();  // body timeout, reset or a truncated body
    return;
  }
  if (pending_error_) {
    AnswerPendingError();
    return;
  }
  Dispatch();
}

}  // namespace mrcnn::serving
