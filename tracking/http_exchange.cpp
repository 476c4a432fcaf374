#include "tracking/http_exchange.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <stdexcept>

#include "tracking/tls_client.h"

namespace mrcnn::tracking {
namespace {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

template <class Stream>
HttpAnswer RoundTrip(Stream& stream, http::request<http::string_body>& request) {
  http::write(stream, request);
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64u << 20);
  http::read(stream, buffer, parser);
  return HttpAnswer{parser.get().result_int(), std::move(parser.get().body())};
}

}  // namespace

std::string HttpEndpoint::HostHeader() const {
  const std::string name = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  const uint16_t default_port = tls ? 443 : 80;
  return port == default_port ? name : name + ":" + std::to_string(port);
}

std::string HttpEndpoint::Describe() const {
  return std::string(tls ? "https://" : "http://") + HostHeader() + base_path;
}

HttpAnswer ExchangeHttp(const HttpEndpoint& endpoint, std::string_view method,
                        const std::string& target, const HeaderList& headers, std::string_view body,
                        std::chrono::milliseconds timeout) {
  http::request<http::string_body> request;
  request.method_string(beast::string_view(method.data(), method.size()));
  request.target(endpoint.base_path + target);
  request.version(11);
  request.set(http::field::host, endpoint.HostHeader());
  request.set(http::field::user_agent, "mrcnn-trainer");
  for (const auto& [name, value] : headers) {
    request.insert(name, value);
  }
  request.body() = std::string(body);
  request.prepare_payload();
  request.keep_alive(false);
  try {
    net::io_context ioc;
    tcp::resolver resolver(ioc);
    const auto addresses = resolver.resolve(endpoint.host, std::to_string(endpoint.port));
    if (!endpoint.tls) {
      beast::tcp_stream stream(ioc);
      stream.expires_after(timeout);
      stream.connect(addresses);
      HttpAnswer answer = RoundTrip(stream, request);
      beast::error_code ignored;
      stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
      return answer;
    }
    net::ssl::context tls = VerifyingTlsContext();
    beast::ssl_stream<beast::tcp_stream> stream(ioc, tls);
    ExpectServerName(stream, endpoint.host);
    beast::get_lowest_layer(stream).expires_after(timeout);
    beast::get_lowest_layer(stream).connect(addresses);
    stream.handshake(net::ssl::stream_base::client);
    HttpAnswer answer = RoundTrip(stream, request);
    beast::error_code ignored;
    stream.shutdown(ignored);  // servers often just close: not an error worth reporting
    return answer;
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string(method) + " " + endpoint.Describe() + target + ": " +
                             e.what());
  }
}

}  // namespace mrcnn::tracking
