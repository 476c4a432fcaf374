#pragma once
// AWS credentials for signing, found where botocore finds them in a training container, in
// this order: the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN);
// the container credentials endpoint (AWS_CONTAINER_CREDENTIALS_RELATIVE_URI on
// 169.254.170.2, which SageMaker training sets, or AWS_CONTAINER_CREDENTIALS_FULL_URI with
// AWS_CONTAINER_AUTHORIZATION_TOKEN); the EC2 instance metadata service, IMDSv2 (a session
// token first; AWS_EC2_METADATA_SERVICE_ENDPOINT overrides http://169.254.169.254). Temporary
// credentials are fetched again 5 minutes before they expire. Thread-safe.
#include <chrono>
#include <map>
#include <mutex>
#include <string>

#include "tracking/aws_sigv4.h"

namespace mrcnn::tracking {

class AwsCredentialSource {
 public:
  explicit AwsCredentialSource(std::map<std::string, std::string> env);

  // Throws std::runtime_error saying where it looked when no source answers.
  AwsCredentials Get();
  // Where the last credentials came from ("environment", "container endpoint", "IMDSv2").
  std::string source() const;

 private:
  AwsCredentials Fetch();
  std::map<std::string, std::string> env_;
  mutable std::mutex mutex_;
  AwsCredentials cached_;
  std::chrono::system_clock::time_point refresh_at_{};
  std::string source_;
};

// "2026-11-27T18:00:00Z" (ISO 8601, UTC, as the endpoints give Expiration); throws
// std::invalid_argument otherwise.
std::chrono::system_clock::time_point ParseIso8601Utc(const std::string& text);

}  // namespace mrcnn::tracking
