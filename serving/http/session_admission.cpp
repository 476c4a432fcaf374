// HttpSession, admission: what a request's headers decide. The route table finds the route
// (404 and 405 are its HttpErrors) and the route may refuse from the headers alone. A refusal
// is answered after the body is read, so the keep-alive connection stays usable, except with
// Expect: 100-continue, where it is answered at once and the body is never requested.
// Refusals the session makes itself (413, 431, a malformed request) close the connection.
#include <fmt/format.h>

#include "serving/http/session.h"

namespace mrcnn::serving {

namespace beast = boost::beast;
namespace http = boost::beast::http;

void HttpSession::Admit(bool expects_continue) {
  const auto& request = parser_->get();
  try {
    RouteTable::Match match = state_->routes.Resolve(request.method(), target_);
    route_ = match.pattern;
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
    SendContinue();
    return;
  }
  ReadBody();
}

void HttpSession::SendContinue() {
  // curl and others wait for this before sending a body over 1 MB.
  auto interim =
      std::make_shared<http::response<http::empty_body>>(http::status::continue_, version_);
  stream_.expires_after(timeouts_.Continue());
  http::async_write(stream_, *interim,
                    [self = shared_from_this(), interim](beast::error_code write_ec, size_t) {
                      if (write_ec) {
                        self->Close();
                        return;
                      }
                      self->ReadBody();
                    });
}

void HttpSession::RefuseHeadersTooLarge() {
  unread_input_ = true;
  close_after_response_ = true;
  RespondError(431, "headers_too_large",
               fmt::format("the request headers exceed {} bytes", kHeaderLimit));
}

void HttpSession::RefuseMalformed(beast::error_code ec) {
  unread_input_ = true;
  close_after_response_ = true;
  RespondError(400, "bad_request", fmt::format("malformed HTTP request: {}", ec.message()));
}

void HttpSession::RespondPayloadTooLarge() {
  unread_input_ = true;
  close_after_response_ = true;
  const size_t limit = state_->config.max_payload_bytes;
  // Not parser_->content_length(): its precondition is a finished header, and Beast stops
  // before finishing one whose Content-Length is over the limit. The field is stored by then.
  const auto declared = parser_->get()[http::field::content_length];
  const std::string size = declared.empty() ? "more bytes" : fmt::format("{} bytes", declared);
  RespondError(413, "payload_too_large",
               fmt::format("the request body has {}; the limit is {} bytes ({:.3g} MiB, "
                           "SAGEMAKER_MAX_PAYLOAD_IN_MB or --max-payload-mb). Send a smaller "
                           "or more compressed image",
                           size, limit, static_cast<double>(limit) / (1 << 20)));
}

void HttpSession::AnswerPendingError() {
  const HttpError error = std::move(*pending_error_);
  pending_error_.reset();
  Send(ErrorAnswer(error));
}

}  // namespace mrcnn::serving
