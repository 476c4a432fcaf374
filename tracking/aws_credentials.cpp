#include "tracking/aws_credentials.h"

#include <ctime>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "tracking/http_exchange.h"
#include "tracking/mlflow_endpoint.h"

namespace mrcnn::tracking {
namespace {

constexpr auto kTimeout = std::chrono::seconds(5);
constexpr auto kRefreshBefore = std::chrono::minutes(5);

std::string Lookup(const std::map<std::string, std::string>& env, const std::string& key) {
  const auto it = env.find(key);
  return it == env.end() ? std::string() : it->second;
}

// {"AccessKeyId", "SecretAccessKey", "Token", "Expiration"} (both endpoints' shape).
AwsCredentials FromJson(const std::string& body, std::chrono::system_clock::time_point* expires,
                        const std::string& where) {
  const nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (!j.is_object() || !j.contains("AccessKeyId") || !j.contains("SecretAccessKey")) {
    throw std::runtime_error(where + " answered without AccessKeyId and SecretAccessKey");
  }
  AwsCredentials credentials{j["AccessKeyId"].get<std::string>(),
                             j["SecretAccessKey"].get<std::string>(), j.value("Token", "")};
  *expires = j.contains("Expiration") ? ParseIso8601Utc(j["Expiration"].get<std::string>())
                                      : std::chrono::system_clock::time_point::max();
  return credentials;
}

HttpAnswer FetchUrl(const std::string& url, const HeaderList& headers, const std::string& what,
                    std::string_view method = "GET") {
  const HttpEndpoint endpoint = ParseHttpUrl(url, what);
  const size_t path_start = url.find('/', url.find("//") + 2);
  const std::string target = path_start == std::string::npos ? "/" : url.substr(path_start);
  HttpEndpoint host_only = endpoint;
  host_only.base_path.clear();
  HttpAnswer answer = ExchangeHttp(host_only, method, target, headers, "", kTimeout);
  if (answer.status != 200) {
    throw std::runtime_error(what + " answered HTTP " + std::to_string(answer.status) + ": " +
                             answer.body.substr(0, 200));
  }
  return answer;
}

}  // namespace

std::chrono::system_clock::time_point ParseIso8601Utc(const std::string& text) {
  std::tm tm{};
  const char* end = strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (end == nullptr || (*end != 'Z' && *end != '.' && *end != '+')) {
    throw std::invalid_argument("not an ISO 8601 UTC time: \"" + text + "\"");
  }
  return std::chrono::system_clock::from_time_t(timegm(&tm));
}

AwsCredentialSource::AwsCredentialSource(std::map<std::string, std::string> env)
    : env_(std::move(env)) {}

std::string AwsCredentialSource::source() const {
  std::lock_guard lock(mutex_);
  return source_;
}

AwsCredentials AwsCredentialSource::Get() {
  std::lock_guard lock(mutex_);
  if (!cached_.access_key_id.empty() && std::chrono::system_clock::now() < refresh_at_) {
    return cached_;
  }
  cached_ = Fetch();
  return cached_;
}

AwsCredentials AwsCredentialSource::Fetch() {
  const std::string key = Lookup(env_, "AWS_ACCESS_KEY_ID");
  const std::string secret = Lookup(env_, "AWS_SECRET_ACCESS_KEY");
  if (!key.empty() && !secret.empty()) {
    source_ = "environment";
    refresh_at_ = std::chrono::system_clock::time_point::max();
    return AwsCredentials{key, secret, Lookup(env_, "AWS_SESSION_TOKEN")};
  }
  std::chrono::system_clock::time_point expires;
  const std::string relative = Lookup(env_, "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
  const std::string full = Lookup(env_, "AWS_CONTAINER_CREDENTIALS_FULL_URI");
  if (!relative.empty() || !full.empty()) {
    const std::string url = !relative.empty() ? "http://169.254.170.2" + relative : full;
    HeaderList headers;
    if (const std::string token = Lookup(env_, "AWS_CONTAINER_AUTHORIZATION_TOKEN");
        !token.empty()) {
      headers.emplace_back("Authorization", token);
    }
    const AwsCredentials credentials =
        FromJson(FetchUrl(url, headers, "the container credentials endpoint " + url).body, &expires,
                 "the container credentials endpoint " + url);
    source_ = "container endpoint";
    refresh_at_ = expires - kRefreshBefore;
    return credentials;
  }
  std::string imds = Lookup(env_, "AWS_EC2_METADATA_SERVICE_ENDPOINT");
  if (imds.empty()) {
    imds = "http://169.254.169.254";
  }
  while (imds.ends_with('/')) {
    imds.pop_back();
  }
  try {
    const std::string token =
        FetchUrl(imds + "/latest/api/token", {{"X-aws-ec2-metadata-token-ttl-seconds", "21600"}},
                 "IMDSv2", "PUT")
            .body;
    const HeaderList with_token = {{"X-aws-ec2-metadata-token", token}};
    const std::string base = imds + "/latest/meta-data/iam/security-credentials/";
    std::string role = FetchUrl(base, with_token, "IMDSv2").body;
    role = role.substr(0, role.find('\n'));
    const AwsCredentials credentials =
        FromJson(FetchUrl(base + role, with_token, "IMDSv2").body, &expires, "IMDSv2");
    source_ = "IMDSv2";
    refresh_at_ = expires - kRefreshBefore;
    return credentials;
  } catch (const std::exception& e) {
    throw std::runtime_error(
        std::string("no AWS credentials for signing: AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY are "
                    "unset, so is AWS_CONTAINER_CREDENTIALS_RELATIVE_URI/FULL_URI, and the "
                    "instance metadata service did not answer (") +
        e.what() + ")");
  }
}

}  // namespace mrcnn::tracking
