#pragma once
// A failed try at a download, and whether another try may succeed: connection errors, 5xx,
// 408/429, stalls and truncated bodies may pass; a 4xx, a certificate the trust store does not
// accept, too many redirects or a file of the wrong content will not.
#include <stdexcept>
#include <string>

namespace mrcnn::download {

class DownloadError : public std::runtime_error {
 public:
  DownloadError(bool retryable, const std::string& cause)
      : std::runtime_error(cause), retryable_(retryable) {}
  bool retryable() const { return retryable_; }

 private:
  bool retryable_;
};

}  // namespace mrcnn::download
