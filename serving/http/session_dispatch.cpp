// HttpSession, dispatch: the body goes to the route's exchange, whose one answer comes back
// from any thread (Deliver) unless the route's deadline answers first; whichever comes second
// is dropped.
#include <boost/asio/post.hpp>

#include "serving/http/session.h"

namespace mrcnn::serving {

namespace beast = boost::beast;
namespace net = boost::asio;

void HttpSession::Dispatch() {
  phase_ = Phase::kProcessing;
  awaiting_result_ = true;
  const uint64_t id = request_id_;
  if (exchange_->deadline) {
    ArmDeadline(id);
  }
  stream_.expires_never();  // the route, and its deadline, own this phase
  exchange_->run(parser_->release().body(), [self = shared_from_this(), id](RouteAnswer answer) {
    self->Deliver(id, std::move(answer));
  });
}

void HttpSession::Deliver(uint64_t id, RouteAnswer answer) {
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

void HttpSession::ArmDeadline(uint64_t id) {
  deadline_timer_.expires_at(*exchange_->deadline);
  deadline_timer_.async_wait([self = shared_from_this(), id](beast::error_code timer_ec) {
    if (!timer_ec) {
      self->OnDeadline(id);
    }
  });
}

void HttpSession::OnDeadline(uint64_t id) {
  if (id != request_id_ || !awaiting_result_) {
    return;
  }
  awaiting_result_ = false;
  Send(exchange_->deadline_answer);
}

}  // namespace mrcnn::serving
