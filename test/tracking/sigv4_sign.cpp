// Signs requests with our SigV4 signer for test_sigv4_botocore.py, which signs the same ones
// with botocore. stdin: a JSON list of {method, host, path, query: [[name, value]...],
// headers: [[name, value]...], body_hex, access_key, secret_key, session_token, region,
// service, time (seconds since the epoch)}; stdout: a JSON list of {url_query, headers:
// [[name, value]...], canonical_request}. Exit 1 with the reason on stderr for bad input.
#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "tracking/aws_sigv4.h"

namespace {

std::string FromHex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  }
  return out;
}

}  // namespace

int main() {
  using namespace mrcnn::tracking;
  try {
    std::ostringstream text;
    text << std::cin.rdbuf();
    const nlohmann::json input = nlohmann::json::parse(text.str());
    nlohmann::json output = nlohmann::json::array();
    for (const nlohmann::json& item : input) {
      const std::string body = FromHex(item.at("body_hex").get<std::string>());
      SignableRequest request;
      request.method = item.at("method");
      request.host = item.at("host");
      request.path = item.at("path");
      for (const auto& pair : item.at("query")) {
        request.query.emplace_back(pair.at(0), pair.at(1));
      }
      for (const auto& pair : item.at("headers")) {
        request.headers.emplace_back(pair.at(0), pair.at(1));
      }
      request.body = body;
      const AwsCredentials credentials{item.at("access_key"), item.at("secret_key"),
                                       item.at("session_token")};
      const SigV4Signature signature =
          SignSigV4(request, credentials, {item.at("region"), item.at("service")},
                    std::chrono::system_clock::time_point(
                        std::chrono::seconds(item.at("time").get<int64_t>())));
      nlohmann::json headers = nlohmann::json::array();
      for (const auto& [name, value] : signature.headers) {
        headers.push_back({name, value});
      }
      output.push_back({{"url_query", EncodeSigV4Query(request.query)},
                        {"headers", headers},
                        {"canonical_request", signature.canonical_request}});
    }
    std::cout << output.dump() << "\n";
  } catch (const std::exception& e) {
    std::cerr << "sigv4_sign: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
