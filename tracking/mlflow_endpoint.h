#pragma once
// Where MLflow's REST API is, from MLFLOW_TRACKING_URI:
//   http(s)://host[:port][/prefix]   a tracking server (mlflow server, a proxy)
//   arn:aws:sagemaker:REGION:ACCOUNT:mlflow-tracking-server/NAME
//                                    a SageMaker managed MLflow server: requests go to
//                                    https://REGION.experiments.sagemaker.aws (or
//                                    SAGEMAKER_MLFLOW_CUSTOM_ENDPOINT), carry the header
//                                    x-mlflow-sm-tracking-server-arn and are SigV4-signed
//                                    for "sagemaker-mlflow" in REGION, as the sagemaker-mlflow
//                                    plugin sends them.
// Anything else (file:, databricks, a bare path) is refused with the forms above: MLflow's
// local stores are Python-only.
#include <optional>
#include <string>
#include <string_view>

#include "tracking/aws_sigv4.h"
#include "tracking/http_exchange.h"

namespace mrcnn::tracking {

struct MlflowEndpoint {
  HttpEndpoint http;
  HeaderList headers;               // sent with every request
  std::optional<SigV4Scope> sigv4;  // set for a SageMaker ARN
};

// Throws std::invalid_argument naming MLFLOW_TRACKING_URI (or the custom endpoint) and the
// accepted forms.
MlflowEndpoint ParseTrackingUri(std::string_view uri, std::string_view custom_endpoint = {});

// "http://host:port/prefix" -> HttpEndpoint; throws std::invalid_argument naming `what`.
HttpEndpoint ParseHttpUrl(std::string_view url, std::string_view what);

}  // namespace mrcnn::tracking
