#include "tracking/mlflow_endpoint.h"

#include <stdexcept>
#include <vector>

namespace mrcnn::tracking {
namespace {

std::vector<std::string> Split(std::string_view text, char separator) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t end = text.find(separator, start);
    parts.emplace_back(text.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) {
      return parts;
    }
    start = end + 1;
  }
}

}  // namespace

HttpEndpoint ParseHttpUrl(std::string_view url, std::string_view what) {
  const auto fail = [&](const std::string& why) {
    return std::invalid_argument(std::string(what) + ": " + why + ", got \"" + std::string(url) +
                                 "\" (expected http://host[:port][/prefix] or https://...)");
  };
  HttpEndpoint endpoint;
  std::string_view rest;
  if (url.starts_with("http://")) {
    rest = url.substr(7);
  } else if (url.starts_with("https://")) {
    endpoint.tls = true;
    endpoint.port = 443;
    rest = url.substr(8);
  } else {
    throw fail("not an http(s) URL");
  }
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  if (slash != std::string_view::npos) {
    std::string_view path = rest.substr(slash);
    while (path.ends_with('/')) {
      path.remove_suffix(1);
    }
    endpoint.base_path = std::string(path);
  }
  if (authority.find('@') != std::string_view::npos) {
    throw fail("credentials in the URL are not supported");
  }
  std::string_view port;
  if (authority.starts_with('[')) {  // [IPv6]:port
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) {
      throw fail("unclosed [ in the host");
    }
    endpoint.host = std::string(authority.substr(1, close - 1));
    if (close + 1 < authority.size()) {
      if (authority[close + 1] != ':') {
        throw fail("junk after ]");
      }
      port = authority.substr(close + 2);
    }
  } else {
    const size_t colon = authority.find(':');
    endpoint.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) {
      port = authority.substr(colon + 1);
    }
  }
  if (endpoint.host.empty()) {
    throw fail("no host");
  }
  if (!port.empty()) {
    int value = 0;
    for (const char c : port) {
      if (c < '0' || c > '9' || (value = value * 10 + (c - '0')) > 65535) {
        throw fail("bad port");
      }
    }
    if (value == 0) {
      throw fail("bad port");
    }
    endpoint.port = static_cast<uint16_t>(value);
  }
  return endpoint;
}

MlflowEndpoint ParseTrackingUri(std::string_view uri, std::string_view custom_endpoint) {
  MlflowEndpoint endpoint;
  if (uri.starts_with("http://") || uri.starts_with("https://")) {
    endpoint.http = ParseHttpUrl(uri, "MLFLOW_TRACKING_URI");
    return endpoint;
  }
  if (uri.starts_with("arn:")) {
    // arn:PARTITION:sagemaker:REGION:ACCOUNT:mlflow-tracking-server/NAME
    const std::string arn(uri.substr(0, uri.find('#')));  // "#role-arn" is the plugin's
    const std::vector<std::string> fields = Split(arn, ':');
    if (fields.size() != 6 || fields[2] != "sagemaker" || fields[3].empty() ||
        !fields[5].starts_with("mlflow-tracking-server/") ||
        fields[5].size() == std::string("mlflow-tracking-server/").size()) {
      throw std::invalid_argument(
          "MLFLOW_TRACKING_URI: not a SageMaker MLflow tracking server ARN, got \"" + arn +
          "\" (expected arn:aws:sagemaker:REGION:ACCOUNT:mlflow-tracking-server/NAME)");
    }
    if (fields[1] != "aws" && fields[1] != "aws-us-gov") {
      throw std::invalid_argument("MLFLOW_TRACKING_URI: partition \"" + fields[1] +
                                  "\" has no SageMaker MLflow endpoint we know; set "
                                  "SAGEMAKER_MLFLOW_CUSTOM_ENDPOINT to its https URL");
    }
    if (uri.find('#') != std::string_view::npos) {
      throw std::invalid_argument(
          "MLFLOW_TRACKING_URI: \"ARN#ROLE-ARN\" (assuming a role) is not supported; give the "
          "job's role access to the tracking server instead");
    }
    endpoint.http = custom_endpoint.empty()
                        ? ParseHttpUrl("https://" + fields[3] + ".experiments.sagemaker.aws",
                                       "MLFLOW_TRACKING_URI")
                        : ParseHttpUrl(custom_endpoint, "SAGEMAKER_MLFLOW_CUSTOM_ENDPOINT");
    endpoint.headers.emplace_back("x-mlflow-sm-tracking-server-arn", arn);
    endpoint.sigv4 = SigV4Scope{fields[3], "sagemaker-mlflow"};
    return endpoint;
  }
  throw std::invalid_argument(
      "MLFLOW_TRACKING_URI: \"" + std::string(uri) +
      "\" is neither an http(s) URL of a tracking server nor a SageMaker MLflow tracking server "
      "ARN (arn:aws:sagemaker:REGION:ACCOUNT:mlflow-tracking-server/NAME); MLflow's local file "
      "and database stores are Python-only");
}

}  // namespace mrcnn::tracking
