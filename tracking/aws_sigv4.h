#pragma once
// AWS Signature Version 4 for HTTP requests (header form, AWS4-HMAC-SHA256), as SageMaker's
// managed MLflow tracking servers require it (service "sagemaker-mlflow", the region of the
// server's ARN; the sagemaker-mlflow plugin signs with botocore's SigV4Auth). The result is
// the same as botocore's SigV4Auth.add_auth on the same request: every header is signed except
// the hop-by-hop and tracing ones botocore leaves out (connection, expect, user-agent, ...);
// header values are trimmed and inner whitespace runs collapsed; repeated headers are joined
// with ',' in order; the path has its dot segments and empty segments removed and is
// percent-encoded once more (as AWS wants for every service but S3; for the service "s3" the
// path is signed as it is sent, already encoded, as botocore's S3SigV4Auth does); query parameters are
// percent-encoded (RFC 3986 unreserved characters kept) and sorted by name, then value; the
// payload hash is X-Amz-Content-SHA256 when the request has one, else the body's SHA-256.
// Checked against AWS's published test suite and against botocore on our own requests
// (test/tracking/).
#include <chrono>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mrcnn::tracking {

struct AwsCredentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // empty for long-term keys; else sent as X-Amz-Security-Token
};

using HeaderList = std::vector<std::pair<std::string, std::string>>;

struct SignableRequest {
  std::string method;                                      // GET, POST, ...
  std::string host;                                        // with :port unless the default
  std::string path = "/";                                  // as it appears in the request line
  std::vector<std::pair<std::string, std::string>> query;  // decoded names and values
  HeaderList headers;                                      // any case; Host is added if absent
  std::string_view body;
};

struct SigV4Scope {
  std::string region;   // us-east-1
  std::string service;  // sagemaker-mlflow
};

struct SigV4Signature {
  std::string canonical_request;
  std::string string_to_sign;
  std::string signature;  // lower-case hex
  // The headers to add to the request as it is sent: X-Amz-Date, X-Amz-Security-Token (with
  // a session token) and Authorization.
  HeaderList headers;
};

// Signs `request` at time `now` (UTC). Throws std::invalid_argument for an empty method,
// host, region, service or key, or a path that does not start with '/'.
SigV4Signature SignSigV4(const SignableRequest& request, const AwsCredentials& credentials,
                         const SigV4Scope& scope, std::chrono::system_clock::time_point now);

// The query string the request must be sent with for the signature to hold: the same
// encoding the canonical request uses, in the given order ("a=1&b=x%20y").
std::string EncodeSigV4Query(const std::vector<std::pair<std::string, std::string>>& query);

// RFC 3986 percent-encoding of UTF-8 bytes: A-Z a-z 0-9 - _ . ~ kept, and `also_keep`.
std::string PercentEncode(std::string_view text, std::string_view also_keep = {});

// Lower-case hex SHA-256 of `data`.
std::string Sha256Hex(std::string_view data);

}  // namespace mrcnn::tracking
