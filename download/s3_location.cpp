#include "download/s3_location.h"

#include <stdexcept>

namespace mrcnn::download {

S3Object ParseS3Url(std::string_view url) {
  constexpr std::string_view kScheme = "s3://";
  const std::string_view rest = url.substr(url.starts_with(kScheme) ? kScheme.size() : 0);
  const size_t slash = rest.find('/');
  if (!url.starts_with(kScheme) || slash == 0 || slash == std::string_view::npos ||
      slash + 1 == rest.size()) {
    throw std::invalid_argument("\"" + std::string(url) + "\" is not s3://BUCKET/KEY");
  }
  return {std::string(rest.substr(0, slash)), std::string(rest.substr(slash + 1))};
}

S3Address S3AddressOf(const S3Object& object, const common::EnvMap& env) {
  S3Address address;
  address.region = "us-east-1";
  for (const char* name : {"AWS_DEFAULT_REGION", "AWS_REGION"}) {  // the later one wins
    if (auto v = common::Lookup(env, name); v && !v->empty())
      address.region = *v;
  }
  const std::string key = tracking::PercentEncode(object.key, "/");
  for (const char* name : {"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"}) {
    if (auto endpoint = common::Lookup(env, name); endpoint && !endpoint->empty()) {
      try {
        address.url = ParseUrl(*endpoint);
      } catch (const std::invalid_argument& e) {
        throw std::invalid_argument(std::string(name) + ": " + e.what());
      }
      std::string base = address.url.target.substr(0, address.url.target.find('?'));
      while (base.ends_with('/'))
        base.pop_back();
      address.url.target = base + "/" + object.bucket + "/" + key;
      return address;
    }
  }
  const std::string regional = "s3." + address.region + ".amazonaws.com";
  const bool dotted = object.bucket.find('.') != std::string::npos;
  address.url = ParseUrl("https://" + (dotted ? regional : object.bucket + "." + regional) + "/");
  address.url.target = (dotted ? "/" + object.bucket + "/" : "/") + key;
  return address;
}

tracking::HeaderList SignS3Get(const S3Address& address, const tracking::HeaderList& headers,
                               const tracking::AwsCredentials& credentials,
                               std::chrono::system_clock::time_point now) {
  tracking::HeaderList added = {{"X-Amz-Content-SHA256", tracking::Sha256Hex("")}};
  tracking::SignableRequest request;
  request.method = "GET";
  request.host = address.url.HostHeader();
  request.path = address.url.target;
  request.headers = headers;
  request.headers.insert(request.headers.end(), added.begin(), added.end());
  const tracking::SigV4Signature signature =
      tracking::SignSigV4(request, credentials, {address.region, "s3"}, now);
  added.insert(added.end(), signature.headers.begin(), signature.headers.end());
  return added;
}

}  // namespace mrcnn::download
