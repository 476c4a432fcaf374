#pragma once
// A request that must be answered with an error status. `code` is a stable machine-readable
// token ("payload_too_large"), `detail` says what was wrong and how to fix it. Every error
// response body is {"error": code, "detail": detail}.
#include <stdexcept>
#include <string>

namespace mrcnn::serving {

class HttpError : public std::runtime_error {
 public:
  HttpError(unsigned status, std::string code, const std::string& detail)
      : std::runtime_error(detail), status_(status), code_(std::move(code)) {}

  unsigned status() const { return status_; }
  const std::string& code() const { return code_; }
  std::string detail() const { return what(); }

 private:
  unsigned status_;
  std::string code_;
};

}  // namespace mrcnn::serving
