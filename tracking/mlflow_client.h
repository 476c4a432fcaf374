#pragma once
// MLflow's REST API (2.0 paths, as `mlflow server` and SageMaker's managed servers answer
// them), the calls a training run needs, one request each, no retries (mlflow_run.h retries).
// Every request carries the endpoint's headers and, for a SageMaker ARN, a SigV4 signature
// with X-Amz-Content-SHA256 (as the sagemaker-mlflow plugin signs).
#include <chrono>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "tracking/mlflow_endpoint.h"

namespace mrcnn::tracking {

struct MlflowMetric {
  std::string key;
  double value = 0;
  int64_t timestamp_ms = 0;
  int64_t step = 0;
};
using MlflowKeyValues = std::vector<std::pair<std::string, std::string>>;

// A failed call: the HTTP status (0: no answer) and MLflow's error_code when it sent one.
class MlflowError : public std::runtime_error {
 public:
  MlflowError(const std::string& what, unsigned status, std::string error_code)
      : std::runtime_error(what), status_(status), error_code_(std::move(error_code)) {}
  unsigned status() const { return status_; }
  const std::string& error_code() const { return error_code_; }
  // Worth trying again later: no answer, 429, or a server error.
  bool retryable() const { return status_ == 0 || status_ == 429 || status_ >= 500; }

 private:
  unsigned status_;
  std::string error_code_;
};

struct MlflowRunInfo {
  std::string run_id;
  std::string experiment_id;
  std::string artifact_uri;
  std::string status;
};

class MlflowClient {
 public:
  // `credentials` is called per request for a SigV4 endpoint (unused otherwise).
  MlflowClient(MlflowEndpoint endpoint, std::function<AwsCredentials()> credentials,
               std::chrono::milliseconds timeout = std::chrono::seconds(30));

  // POST /api/2.0/mlflow/<api> with a JSON body; GET with query parameters.
  nlohmann::json Post(const std::string& api, const nlohmann::json& body);
  nlohmann::json Get(const std::string& api,
                     const std::vector<std::pair<std::string, std::string>>& query);

  // The experiment's id, creating it when it does not exist.
  std::string ExperimentId(const std::string& name);
  MlflowRunInfo CreateRun(const std::string& experiment_id, const std::string& run_name,
                          int64_t start_ms, const MlflowKeyValues& tags);
  MlflowRunInfo GetRun(const std::string& run_id);
  // One runs/log-batch call: at most 1000 metrics, 100 params and 100 tags (MLflow's limits).
  void LogBatch(const std::string& run_id, const std::vector<MlflowMetric>& metrics,
                const MlflowKeyValues& params, const MlflowKeyValues& tags);
  void UpdateRun(const std::string& run_id, const std::string& status, int64_t end_ms);
  // PUT through the server's artifact proxy; the run's artifact_uri must be mlflow-artifacts:
  // (what `mlflow server` gives by default); throws MlflowError otherwise.
  void UploadArtifact(const MlflowRunInfo& run, const std::string& relative_path,
                      std::string_view bytes, const std::string& content_type);

  const MlflowEndpoint& endpoint() const { return endpoint_; }

 private:
  nlohmann::json Call(const std::string& method, const std::string& path,
                      const std::vector<std::pair<std::string, std::string>>& query,
                      std::string_view body, const std::string& content_type);
  MlflowEndpoint endpoint_;
  std::function<AwsCredentials()> credentials_;
  std::chrono::milliseconds timeout_;
};

// The log-batch body (also a line of the unsent file).
nlohmann::json LogBatchJson(const std::string& run_id, const std::vector<MlflowMetric>& metrics,
                            const MlflowKeyValues& params, const MlflowKeyValues& tags);

}  // namespace mrcnn::tracking
