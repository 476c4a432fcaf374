#pragma once
// The TLS client side every outgoing connection of the project shares (MLflow, AWS credential
// endpoints, weight downloads): the server's certificate is verified against the system's trust
// store, which OpenSSL reads from its default paths or from SSL_CERT_FILE / SSL_CERT_DIR when
// they are set (how a private CA, or a test's own, is trusted); the host name (or IP address)
// must match the certificate; SNI is sent.
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/ssl.hpp>
#include <string>

namespace mrcnn::tracking {

// A client context that verifies the peer as above.
boost::asio::ssl::context VerifyingTlsContext();

// Sets SNI and the host-name check for `host` on a stream made from VerifyingTlsContext(),
// before its handshake. Throws std::runtime_error when OpenSSL refuses the name.
void ExpectServerName(boost::beast::ssl_stream<boost::beast::tcp_stream>& stream,
                      const std::string& host);

}  // namespace mrcnn::tracking
