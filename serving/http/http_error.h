#pragma once
// A request that must be answered with an error status. `code` is a stable machine-readable
// token ("payload_too_large"), `detail` says what was wrong and how to fix it. Every error
// response body is {"error": code, "detail": detail}; `headers` go on that response too
// (Allow on a 405, the echoed custom attributes of /invocations).
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace mrcnn::serving {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

class HttpError : public std::runtime_error {
 public:
  HttpError(unsigned status, std::string code, const std::string& detail, HttpHeaders headers = {})
      : std::runtime_error(detail),
        status_(status),
        code_(std::move(code)),
        headers_(std::move(headers)) {}

  unsigned status() const { return status_; }
  const std::string& code() const { return code_; }
  std::string detail() const { return what(); }
  const HttpHeaders& headers() const { return headers_; }
  void AddHeaders(const HttpHeaders& headers) {
    headers_.insert(headers_.end(), headers.begin(), headers.end());
  }

 private:
  unsigned status_;
  std::string code_;
  HttpHeaders headers_;
};

}  // namespace mrcnn::serving
