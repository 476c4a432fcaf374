#include "tracking/tls_client.h"

#include <openssl/ssl.h>

#include <stdexcept>

namespace mrcnn::tracking {

boost::asio::ssl::context VerifyingTlsContext() {
  boost::asio::ssl::context tls(boost::asio::ssl::context::tls_client);
  tls.set_default_verify_paths();
  tls.set_verify_mode(boost::asio::ssl::verify_peer);
  return tls;
}

void ExpectServerName(boost::beast::ssl_stream<boost::beast::tcp_stream>& stream,
                      const std::string& host) {
  // SNI carries names only: an IP address is checked against the certificate without it.
  boost::system::error_code not_an_address;
  boost::asio::ip::make_address(host, not_an_address);
  if (not_an_address && !SSL_set_tlsext_host_name(stream.native_handle(), host.c_str())) {
    throw std::runtime_error("cannot set the TLS server name " + host);
  }
  stream.set_verify_callback(boost::asio::ssl::host_name_verification(host));
}

}  // namespace mrcnn::tracking
