#include "tracking/mlflow_client.h"

#include <chrono>

namespace mrcnn::tracking {
namespace {

nlohmann::json KeyValuesJson(const MlflowKeyValues& pairs) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [key, value] : pairs) {
    out.push_back({{"key", key}, {"value", value}});
  }
  return out;
}

MlflowRunInfo RunInfoOf(const nlohmann::json& answer) {
  const nlohmann::json& info = answer.at("run").at("info");
  return MlflowRunInfo{info.at("run_id").get<std::string>(),
                       info.at("experiment_id").get<std::string>(), info.value("artifact_uri", ""),
                       info.value("status", "")};
}

}  // namespace

nlohmann::json LogBatchJson(const std::string& run_id, const std::vector<MlflowMetric>& metrics,
                            const MlflowKeyValues& params, const MlflowKeyValues& tags) {
  nlohmann::json body = {{"run_id", run_id}};
  nlohmann::json metric_list = nlohmann::json::array();
  for (const MlflowMetric& m : metrics) {
    metric_list.push_back(
        {{"key", m.key}, {"value", m.value}, {"timestamp", m.timestamp_ms}, {"step", m.step}});
  }
  body["metrics"] = std::move(metric_list);
  body["params"] = KeyValuesJson(params);
  body["tags"] = KeyValuesJson(tags);
  return body;
}

MlflowClient::MlflowClient(MlflowEndpoint endpoint, std::function<AwsCredentials()> credentials,
                           std::chrono::milliseconds timeout)
    : endpoint_(std::move(endpoint)), credentials_(std::move(credentials)), timeout_(timeout) {}

nlohmann::json MlflowClient::Call(const std::string& method, const std::string& path,
                                  const std::vector<std::pair<std::string, std::string>>& query,
                                  std::string_view body, const std::string& content_type) {
  HeaderList headers = endpoint_.headers;
  if (!content_type.empty()) {
    headers.emplace_back("Content-Type", content_type);
  }
  std::string target = path;
  if (!query.empty()) {
    target += '?';  // not "?" + ...: GCC 12's -Wrestrict false positive (bug 105651)
    target += EncodeSigV4Query(query);
  }
  if (endpoint_.sigv4) {
    headers.emplace_back("X-Amz-Content-SHA256", Sha256Hex(body));
    SignableRequest request{
        method, endpoint_.http.HostHeader(), endpoint_.http.base_path + path, query, headers, body};
    for (auto& header :
         SignSigV4(request, credentials_(), *endpoint_.sigv4, std::chrono::system_clock::now())
             .headers) {
      headers.push_back(std::move(header));
    }
  }
  HttpAnswer answer;
  try {
    answer = ExchangeHttp(endpoint_.http, method, target, headers, body, timeout_);
  } catch (const std::exception& e) {
    throw MlflowError(e.what(), 0, "");
  }
  const nlohmann::json parsed = nlohmann::json::parse(answer.body, nullptr, false);
  if (answer.status != 200) {
    std::string code;
    std::string message = answer.body.substr(0, 300);
    if (parsed.is_object()) {
      code = parsed.value("error_code", "");
      message = parsed.value("message", message);
    }
    throw MlflowError(method + " " + endpoint_.http.Describe() + path + ": HTTP " +
                          std::to_string(answer.status) + (code.empty() ? "" : " " + code) + ": " +
                          message,
                      answer.status, code);
  }
  return parsed.is_discarded() ? nlohmann::json::object() : parsed;
}

nlohmann::json MlflowClient::Post(const std::string& api, const nlohmann::json& body) {
  return Call("POST", "/api/2.0/mlflow/" + api, {}, body.dump(), "application/json");
}

nlohmann::json MlflowClient::Get(const std::string& api,
                                 const std::vector<std::pair<std::string, std::string>>& query) {
  return Call("GET", "/api/2.0/mlflow/" + api, query, "", "");
}

std::string MlflowClient::ExperimentId(const std::string& name) {
  try {
    return Get("experiments/get-by-name", {{"experiment_name", name}})
        .at("experiment")
        .at("experiment_id")
        .get<std::string>();
  } catch (const MlflowError& e) {
    if (e.error_code() != "RESOURCE_DOES_NOT_EXIST") {
      throw;
    }
  }
  try {
    return Post("experiments/create", {{"name", name}}).at("experiment_id").get<std::string>();
  } catch (const MlflowError& e) {
    if (e.error_code() != "RESOURCE_ALREADY_EXISTS") {  // another job created it meanwhile
      throw;
    }
  }
  return Get("experiments/get-by-name", {{"experiment_name", name}})
      .at("experiment")
      .at("experiment_id")
      .get<std::string>();
}

MlflowRunInfo MlflowClient::CreateRun(const std::string& experiment_id, const std::string& run_name,
                                      int64_t start_ms, const MlflowKeyValues& tags) {
  nlohmann::json body = {{"experiment_id", experiment_id}, {"start_time", start_ms}};
  if (!run_name.empty()) {
    body["run_name"] = run_name;
  }
  body["tags"] = KeyValuesJson(tags);
  return RunInfoOf(Post("runs/create", body));
}

MlflowRunInfo MlflowClient::GetRun(const std::string& run_id) {
  return RunInfoOf(Get("runs/get", {{"run_id", run_id}}));
}

void MlflowClient::LogBatch(const std::string& run_id, const std::vector<MlflowMetric>& metrics,
                            const MlflowKeyValues& params, const MlflowKeyValues& tags) {
  Post("runs/log-batch", LogBatchJson(run_id, metrics, params, tags));
}

void MlflowClient::UpdateRun(const std::string& run_id, const std::string& status, int64_t end_ms) {
  Post("runs/update", {{"run_id", run_id}, {"status", status}, {"end_time", end_ms}});
}

void MlflowClient::UploadArtifact(const MlflowRunInfo& run, const std::string& relative_path,
                                  std::string_view bytes, const std::string& content_type) {
  static constexpr std::string_view kProxy = "mlflow-artifacts:";
  if (!run.artifact_uri.starts_with(kProxy)) {
    throw MlflowError("the run's artifact location " + run.artifact_uri +
                          " is not served through the tracking server (start it with "
                          "--serve-artifacts, mlflow server's default)",
                      400, "");
  }
  std::string location = run.artifact_uri.substr(kProxy.size());
  if (location.starts_with("//")) {  // mlflow-artifacts://host:port/path
    location = location.substr(location.find('/', 2));
  }
  while (location.starts_with('/')) {
    location.erase(0, 1);
  }
  const std::string path = "/api/2.0/mlflow-artifacts/artifacts/" + PercentEncode(location, "/") +
                           "/" + PercentEncode(relative_path, "/");
  Call("PUT", path, {}, bytes, content_type);
}

}  // namespace mrcnn::tracking
