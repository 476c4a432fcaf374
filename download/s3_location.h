#pragma once
// s3://bucket/key as an HTTP request S3 accepts. The endpoint is AWS_ENDPOINT_URL_S3, else
// AWS_ENDPOINT_URL (botocore's variables: a private endpoint, a VPC endpoint's name, an
// S3-compatible store), addressed path-style (ENDPOINT/bucket/key); else AWS's own,
// virtual-hosted (https://bucket.s3.REGION.amazonaws.com/key), or path-style for a bucket
// whose name has dots (their certificate covers one level of subdomain only). The region is
// AWS_REGION, else AWS_DEFAULT_REGION, else us-east-1. Requests are signed with SigV4 for the
// service "s3" (tracking/aws_sigv4.h) with the credentials tracking/aws_credentials.h finds.
#include <chrono>
#include <string>
#include <string_view>

#include "common/env_map.h"
#include "download/url.h"
#include "tracking/aws_sigv4.h"

namespace mrcnn::download {

struct S3Object {
  std::string bucket;
  std::string key;
};

// Throws std::invalid_argument naming the URL when it has no bucket or no key.
S3Object ParseS3Url(std::string_view url);

struct S3Address {
  Url url;             // where the GET goes (the key percent-encoded once)
  std::string region;  // what the signature is scoped to
};

S3Address S3AddressOf(const S3Object& object, const common::EnvMap& env);

// The headers a GET of `address` with `headers` (Range, ...) needs to be accepted: the
// payload hash and the SigV4 ones.
tracking::HeaderList SignS3Get(const S3Address& address, const tracking::HeaderList& headers,
                               const tracking::AwsCredentials& credentials,
                               std::chrono::system_clock::time_point now);

}  // namespace mrcnn::download
