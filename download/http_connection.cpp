#include "download/http_connection.h"

#include <openssl/evp.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <limits>
#include <variant>

#include "download/download_error.h"
#include "tracking/tls_client.h"

namespace mrcnn::download {
namespace {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

// Runs the asynchronous operation `start` begins until it completes; the stream's own timer
// (expires_after) cancels it with beast::error::timeout. Beast's timeouts bound asynchronous
// operations only, which is why a blocking download is written this way.
template <class Start>
beast::error_code Await(net::io_context& ioc, Start&& start) {
  beast::error_code result = net::error::would_block;
  start([&result](beast::error_code ec, auto&&...) { result = ec; });
  ioc.restart();
  ioc.run();
  return result;
}

std::string Seconds(std::chrono::milliseconds d) {
  const auto ms = d.count();
  return ms % 1000 == 0 ? std::to_string(ms / 1000) + " s" : std::to_string(ms) + " ms";
}

std::string Base64(const std::string& text) {
  std::string out(4 * ((text.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(text.data()),
                                static_cast<int>(text.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

// "host:port" as CONNECT wants it, always with the port.
std::string Authority(const Url& url) {
  const std::string name =
      url.host.find(':') != std::string::npos ? "[" + url.host + "]" : url.host;
  return name + ":" + std::to_string(url.port);
}

}  // namespace

struct HttpConnection::State {
  Url url;
  std::optional<Url> proxy;
  ConnectionTimeouts timeouts;
  net::io_context ioc;
  net::ssl::context tls = tracking::VerifyingTlsContext();
  std::variant<std::monostate, beast::tcp_stream, TlsStream> stream;
  beast::flat_buffer buffer;
  http::response_parser<http::buffer_body> parser;

  beast::tcp_stream& Tcp() {
    if (auto* plain = std::get_if<beast::tcp_stream>(&stream))
      return *plain;
    return beast::get_lowest_layer(std::get<TlsStream>(stream));
  }
  std::string Where() const {
    return proxy ? url.HostHeader() + " through the proxy " + proxy->HostHeader()
                 : url.HostHeader();
  }
  void Connect();
  void Tunnel();
  void Handshake();
};

void HttpConnection::State::Connect() {
  const Url& peer = proxy ? *proxy : url;
  tcp::resolver resolver(ioc);
  beast::error_code ec;
  const auto addresses = resolver.resolve(peer.host, std::to_string(peer.port), ec);
  if (ec)
    throw DownloadError(true, "cannot resolve " + peer.host + ": " + ec.message());
  auto& socket = stream.emplace<beast::tcp_stream>(ioc);
  socket.expires_after(timeouts.connect);
  ec = Await(ioc, [&](auto handler) { socket.async_connect(addresses, handler); });
  if (ec == beast::error::timeout) {
    throw DownloadError(
        true, "connecting to " + peer.HostHeader() + " took over " + Seconds(timeouts.connect));
  }
  if (ec)
    throw DownloadError(true, "cannot connect to " + peer.HostHeader() + ": " + ec.message());
}

void HttpConnection::State::Tunnel() {
  auto& socket = std::get<beast::tcp_stream>(stream);
  http::request<http::empty_body> connect{http::verb::connect, Authority(url), 11};
  connect.set(http::field::host, Authority(url));
  if (!proxy->userinfo.empty()) {
    connect.set(http::field::proxy_authorization, "Basic " + Base64(proxy->userinfo));
  }
  socket.expires_after(timeouts.connect);
  beast::error_code ec = Await(ioc, [&](auto h) { http::async_write(socket, connect, h); });
  http::response_parser<http::empty_body> answer;
  answer.skip(true);  // a CONNECT's 2xx has no body: the tunnel starts right after the head
  if (!ec)
    ec = Await(ioc, [&](auto h) { http::async_read_header(socket, buffer, answer, h); });
  if (ec) {
    throw DownloadError(true, "the proxy " + proxy->HostHeader() + " did not open a tunnel to " +
                                  Authority(url) + ": " + ec.message());
  }
  const unsigned status = answer.get().result_int();
  if (status / 100 != 2) {
    throw DownloadError(status >= 500, "the proxy " + proxy->HostHeader() + " answered CONNECT " +
                                           Authority(url) + " with " + std::to_string(status) +
                                           " " + std::string(answer.get().reason()));
  }
}

void HttpConnection::State::Handshake() {
  beast::tcp_stream socket = std::move(std::get<beast::tcp_stream>(stream));
  auto& secure = stream.emplace<TlsStream>(std::move(socket), tls);
  tracking::ExpectServerName(secure, url.host);
  beast::get_lowest_layer(secure).expires_after(timeouts.connect);
  const beast::error_code ec =
      Await(ioc, [&](auto h) { secure.async_handshake(net::ssl::stream_base::client, h); });
  if (ec == beast::error::timeout) {
    throw DownloadError(true, "the TLS handshake with " + Where() + " took over " +
                                  Seconds(timeouts.connect) +
                                  " (the server accepts and does not answer)");
  }
  if (ec) {
    const std::string why = ec.message();
    const bool untrusted = why.find("certificate verify failed") != std::string::npos;
    throw DownloadError(
        !untrusted, "the TLS handshake with " + Where() + " failed: " + why +
                        (untrusted ? " (a private CA's certificate goes in SSL_CERT_FILE)" : ""));
  }
}

HttpConnection::HttpConnection(const Url& url, const std::optional<Url>& proxy,
                               ConnectionTimeouts timeouts)
    : state_(std::make_unique<State>()) {
  state_->url = url;
  state_->proxy = proxy;
  state_->timeouts = timeouts;
  state_->Connect();
  if (url.tls && proxy)
    state_->Tunnel();
  if (url.tls)
    state_->Handshake();
}

HttpConnection::~HttpConnection() = default;

AnswerHead HttpConnection::Get(const tracking::HeaderList& headers) {
  State& s = *state_;
  const bool absolute_form = s.proxy && !s.url.tls;
  http::request<http::empty_body> request{http::verb::get,
                                          absolute_form ? s.url.ToString() : s.url.target, 11};
  request.set(http::field::host, s.url.HostHeader());
  request.set(http::field::user_agent, "mrcnn-trainer");
  request.set(http::field::accept_encoding, "identity");
  request.set(http::field::connection, "close");
  if (absolute_form && !s.proxy->userinfo.empty()) {
    request.set(http::field::proxy_authorization, "Basic " + Base64(s.proxy->userinfo));
  }
  for (const auto& [name, value] : headers)
    request.set(name, value);
  // The body goes to disk, whatever its size. Not boost::none: Boost 1.74 compares the
  // length with the optional itself, and any length is "greater" than none.
  s.parser.body_limit(std::numeric_limits<std::uint64_t>::max());
  beast::error_code ec;
  std::visit(
      [&](auto& stream) {
        if constexpr (!std::is_same_v<std::decay_t<decltype(stream)>, std::monostate>) {
          s.Tcp().expires_after(s.timeouts.idle);
          ec = Await(s.ioc, [&](auto h) { http::async_write(stream, request, h); });
          s.Tcp().expires_after(s.timeouts.idle);
          if (!ec)
            ec = Await(s.ioc,
                       [&](auto h) { http::async_read_header(stream, s.buffer, s.parser, h); });
        }
      },
      s.stream);
  if (ec == beast::error::timeout) {
    throw DownloadError(true, s.Where() + " sent no answer within " + Seconds(s.timeouts.idle) +
                                  " (it accepts the connection and stalls)");
  }
  if (ec)
    throw DownloadError(true, s.Where() + " gave no answer: " + ec.message());
  const auto& head = s.parser.get();
  AnswerHead answer;
  answer.status = head.result_int();
  answer.reason = std::string(head.reason());
  if (const auto length = s.parser.content_length())
    answer.content_length = *length;
  answer.content_range = std::string(head[http::field::content_range]);
  answer.location = std::string(head[http::field::location]);
  answer.etag = std::string(head[http::field::etag]);
  return answer;
}

size_t HttpConnection::ReadBody(char* buffer, size_t size) {
  State& s = *state_;
  while (!s.parser.is_done()) {
    s.parser.get().body().data = buffer;
    s.parser.get().body().size = size;
    beast::error_code ec;
    std::visit(
        [&](auto& stream) {
          if constexpr (!std::is_same_v<std::decay_t<decltype(stream)>, std::monostate>) {
            s.Tcp().expires_after(s.timeouts.idle);
            ec =
                Await(s.ioc, [&](auto h) { http::async_read_some(stream, s.buffer, s.parser, h); });
          }
        },
        s.stream);
    if (ec == http::error::need_buffer)
      ec = {};
    if (ec == beast::error::timeout) {
      throw DownloadError(true, "no data from " + s.Where() + " for " + Seconds(s.timeouts.idle) +
                                    " (the download stalled)");
    }
    if (ec) {
      throw DownloadError(
          true, "the connection to " + s.Where() + " ended before the body did: " + ec.message());
    }
    const size_t received = size - s.parser.get().body().size;
    if (received > 0)
      return received;
  }
  return 0;
}

}  // namespace mrcnn::download
