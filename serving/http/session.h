#pragma once
// Inside http/ only: one HTTP/1.1 connection (Boost.Beast, keep-alive), from the first byte
// of a request to the last byte of its answer, then the next request. Its duties, one file
// each:
//   reading    (session_reading.cpp)    wait for a request, read its headers, then its body
//   admission  (session_admission.cpp)  what the headers decide: the route, 100-continue, or
//                                       a refusal (404, 405, 413, 431, a route's HttpError)
//   dispatch   (session_dispatch.cpp)   hand the body to the route, take its one answer
//   writing    (session_writing.cpp)    write the answer, keep the connection or close it
//   timeouts   (session_timeouts.h)     how long each phase may take; the route's deadline
//                                       (session_dispatch.cpp arms it)
// Every handler runs on the connection's strand; only Deliver is called from other threads.
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "serving/http/http_error.h"
#include "serving/http/route.h"
#include "serving/http/server_state.h"
#include "serving/http/session_timeouts.h"

namespace mrcnn::serving {

class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  // state_ is declared first so that it is destroyed last: the io_context it owns must
  // outlive this session's socket and timer.
  HttpSession(std::shared_ptr<HttpServer::State> state, boost::asio::ip::tcp::socket socket);
  ~HttpSession();

  void Start();
  boost::asio::any_io_executor Executor() { return stream_.get_executor(); }
  // Called (posted) on this session's strand when the server starts draining.
  void OnDrain();

 private:
  enum class Phase { kIdle, kReadingHeader, kReadingBody, kProcessing, kWriting, kClosed };
  using Parser = boost::beast::http::request_parser<boost::beast::http::vector_body<uint8_t>>;
  using Clock = std::chrono::steady_clock;
  static constexpr size_t kHeaderLimit = 16 * 1024;

  // Reading.
  void WaitForRequest();
  void OnFirstBytes(boost::beast::error_code ec, size_t bytes);
  void ReadHeader();
  void OnHeader(boost::beast::error_code ec);
  bool HasBody() const;
  void ReadBody();
  void OnBody(boost::beast::error_code ec);

  // Admission.
  void Admit(bool expects_continue);
  void SendContinue();
  void RefuseHeadersTooLarge();
  void RefuseMalformed(boost::beast::error_code ec);
  void RespondPayloadTooLarge();
  void AnswerPendingError();

  // Dispatch.
  void Dispatch();
  void Deliver(uint64_t id, RouteAnswer answer);  // any thread
  void ArmDeadline(uint64_t id);
  void OnDeadline(uint64_t id);

  // Writing.
  void RespondError(unsigned status, const std::string& code, const std::string& detail);
  void Send(RouteAnswer answer);
  void OnWrite(boost::beast::error_code ec, size_t bytes);
  void LingeringClose();
  void Discard();
  void Close();

  std::shared_ptr<HttpServer::State> state_;
  SessionTimeouts timeouts_;
  boost::beast::tcp_stream stream_;
  Phase phase_ = Phase::kIdle;

  // The request being read.
  boost::beast::flat_buffer buffer_;
  std::optional<Parser> parser_;
  unsigned version_ = 11;
  bool request_keep_alive_ = true;
  std::string method_;
  std::string target_;
  std::string_view route_;  // the route table's pattern once routed, else kUnmatchedRoute
  Clock::time_point request_start_;

  // What admission decided.
  std::optional<HttpError> pending_error_;  // answered once the body has been read
  std::optional<Exchange> exchange_;        // the route's part of the current request

  // Dispatch: the answer a route owes.
  boost::asio::steady_timer deadline_timer_;
  uint64_t request_id_ = 0;
  bool awaiting_result_ = false;

  // Writing.
  boost::beast::http::response<boost::beast::http::string_body> response_;
  bool close_after_response_ = false;
  bool unread_input_ = false;
  Clock::time_point linger_until_;
  std::vector<char> discard_;
};

}  // namespace mrcnn::serving
