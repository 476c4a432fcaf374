#include "trainer/engine/events/mlflow_tracking.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/config_error.h"
#include "common/env_map.h"
#include "tracking/aws_credentials.h"
#include "tracking/mlflow_run.h"
#include "trainer/engine/events/console_writer.h"
#include "trainer/engine/events/log_format.h"

namespace mrcnn::engine {
namespace {

using tracking::MlflowKeyValues;
using tracking::MlflowMetric;

std::string EnvValue(const common::EnvMap& env, const std::string& key) {
  return common::Lookup(env, key).value_or("");
}

// SOLVER.BASE_LR -> "0.02"; lists in YAML's flow style ("[800, 1333]").
void Flatten(const YAML::Node& node, const std::string& prefix, MlflowKeyValues& out) {
  if (node.IsMap()) {
    for (const auto& item : node) {
      const std::string key = item.first.as<std::string>();
      Flatten(item.second, prefix.empty() ? key : prefix + "." + key, out);
    }
    return;
  }
  if (node.IsScalar()) {
    out.emplace_back(prefix, node.Scalar());
    return;
  }
  YAML::Emitter flow;
  flow << YAML::Flow << node;
  out.emplace_back(prefix, flow.c_str());
}

// Every number of a metrics.jsonl record but its iteration, as metrics at that step.
std::vector<MlflowMetric> MetricsOf(const nlohmann::json& record) {
  std::vector<MlflowMetric> metrics;
  const int64_t step = record.at("iteration").get<int64_t>();
  const int64_t now = tracking::NowMs();
  for (const auto& [key, value] : record.items()) {
    if (key == "iteration" || key == "max_iter" || !value.is_number()) {
      continue;
    }
    const double number = value.get<double>();
    if (std::isfinite(number)) {  // JSON (and so MLflow's API) has no NaN or infinity
      metrics.push_back(MlflowMetric{key, number, now, step});
    }
  }
  return metrics;
}

class MlflowRecordWriter : public WindowedEventWriter {
 public:
  MlflowRecordWriter(tracking::MlflowRun& run, TrainWindowSpec spec, int64_t start_iter)
      : WindowedEventWriter(start_iter), run_(run), spec_(spec) {}

 protected:
  void WriteWindow(const EventStorage& storage, int64_t last_written) override {
    run_.LogMetrics(MetricsOf(TrainLogJson(TrainWindowEntry(storage, last_written, spec_))));
  }
  void WriteEvaluation(const EvaluationEvent& event) override {
    run_.LogMetrics(MetricsOf(EvalLogJson(EvalEntryOf(event))));
  }

 private:
  tracking::MlflowRun& run_;
  TrainWindowSpec spec_;
};

std::string ReadWholeFile(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

class MlflowTrackingImpl : public MlflowTracking {
 public:
  MlflowTrackingImpl(const TrainJob& job, std::unique_ptr<tracking::MlflowRun> run,
                     std::filesystem::path run_file, bool log_model, const ConsoleLog& log)
      : job_(job),
        run_(std::move(run)),
        run_file_(std::move(run_file)),
        log_model_(log_model),
        log_(log) {}
  ~MlflowTrackingImpl() override { Finish("FAILED", "the trainer ended without a status"); }

  void Tag(const std::string& key, const std::string& value) override {
    run_->SetTags({{key, value}});
  }

  std::unique_ptr<EventWriter> Writer(TrainWindowSpec spec, int64_t start_iter) override {
    return std::make_unique<MlflowRecordWriter>(*run_, spec, start_iter);
  }

  void Finish(const std::string& status, const std::string& failure) override {
    if (finished_) {
      return;
    }
    finished_ = true;
    if (!failure.empty()) {
      run_->SetTags({{"mrcnn.failure", failure.substr(0, failure.find('\n'))}});
    }
    // Finish first: the sender thread creates the run, and on a slow server it may not have
    // done so yet when a short job ends; Finish waits (bounded by
    // MRCNN_MLFLOW_FINISH_TIMEOUT_S) until the run exists and everything queued is sent. The
    // artifact store takes files for a finished run as for a running one.
    run_->Finish(status);
    UploadArtifacts();
    if (const std::string id = run_->run_id(); !id.empty()) {
      std::error_code ignored;
      std::filesystem::create_directories(run_file_.parent_path(), ignored);
      std::ofstream(run_file_) << nlohmann::json{{"run_id", id}}.dump() << "\n";
    }
  }

 private:
  void Upload(const std::string& name, const std::string& bytes, const std::string& type) {
    const std::optional<tracking::MlflowRunInfo> info = run_->info();
    if (!info) {
      log_.Line("[mlflow] warning: no run on the server: artifact " + name + " not uploaded");
      return;
    }
    try {
      run_->client().UploadArtifact(*info, name, bytes, type);
    } catch (const std::exception& e) {
      log_.Line("[mlflow] warning: artifact " + name + " not uploaded: " + e.what());
    }
  }

  void UploadArtifacts() {
    Upload("config.yaml", job_.config.ToYaml(), "application/x-yaml");
    for (const auto& [name, type] : {std::pair{"metrics.jsonl", "application/x-ndjson"},
                                     std::pair{"report.html", "text/html"}}) {
      const std::filesystem::path file = job_.output_dir / name;
      if (std::filesystem::is_regular_file(file)) {
        Upload(name, ReadWholeFile(file), type);
      }
    }
    if (log_model_ && std::filesystem::is_directory(job_.model_dir)) {
      for (const auto& entry : std::filesystem::recursive_directory_iterator(job_.model_dir)) {
        if (entry.is_regular_file()) {
          Upload("model/" + std::filesystem::relative(entry.path(), job_.model_dir).string(),
                 ReadWholeFile(entry.path()), "application/octet-stream");
        }
      }
    }
  }

  const TrainJob& job_;
  std::unique_ptr<tracking::MlflowRun> run_;
  std::filesystem::path run_file_;
  bool log_model_;
  ConsoleLog log_;
  bool finished_ = false;
};

}  // namespace

std::unique_ptr<MlflowTracking> MlflowTracking::Start(const TrainJob& job,
                                                      const MlflowJobFacts& facts,
                                                      const ConsoleLog& log) {
  const common::EnvMap env = common::CurrentEnvironment();
  const std::string uri = EnvValue(env, "MLFLOW_TRACKING_URI");
  if (uri.empty()) {
    return nullptr;
  }
  tracking::MlflowEndpoint endpoint;
  try {
    endpoint = tracking::ParseTrackingUri(uri, EnvValue(env, "SAGEMAKER_MLFLOW_CUSTOM_ENDPOINT"));
  } catch (const std::invalid_argument& e) {
    throw common::ConfigError("environment", "MLFLOW_TRACKING_URI", e.what());
  }
  std::function<tracking::AwsCredentials()> credentials;
  if (endpoint.sigv4) {
    auto source = std::make_shared<tracking::AwsCredentialSource>(env);
    credentials = [source] { return source->Get(); };
  }
  const std::string job_name = EnvValue(env, "TRAINING_JOB_NAME");
  tracking::MlflowRunOptions options;
  options.experiment_name = EnvValue(env, "MLFLOW_EXPERIMENT_NAME");
  if (options.experiment_name.empty()) {
    options.experiment_name = job_name.empty() ? "mask-rcnn" : job_name;
  }
  options.run_name = job_name;
  options.unsent_file = job.output_dir / "mlflow_unsent.jsonl";
  if (const std::string seconds = EnvValue(env, "MRCNN_MLFLOW_FINISH_TIMEOUT_S");
      !seconds.empty()) {
    options.finish_timeout = std::chrono::seconds(std::stoll(seconds));
  }
  const std::filesystem::path run_file = job.checkpoint_dir / "mlflow_run.json";
  options.run_id = EnvValue(env, "MLFLOW_RUN_ID");
  if (options.run_id.empty() && job.resume.value_or(true) && std::filesystem::exists(run_file)) {
    const nlohmann::json saved = nlohmann::json::parse(ReadWholeFile(run_file), nullptr, false);
    if (saved.is_object() && saved.contains("run_id") && saved["run_id"].is_string()) {
      options.run_id = saved["run_id"].get<std::string>();
    }
  }
  Flatten(job.config.ToYamlNode(), "", options.params);
  std::string sources;
  for (const std::string& source : job.config_sources) {
    sources += (sources.empty() ? "" : " -> ") + source;
  }
  options.params.emplace_back("config_sources", sources);
  std::string hosts = facts.hosts;
  if (const nlohmann::json sm_hosts =
          nlohmann::json::parse(EnvValue(env, "SM_HOSTS"), nullptr, false);
      sm_hosts.is_array() && !sm_hosts.empty()) {
    hosts.clear();
    for (const auto& host : sm_hosts) {
      if (!hosts.empty()) {
        hosts += ',';
      }
      hosts += host.is_string() ? host.get<std::string>() : host.dump();
    }
  }
  options.tags = {{"mlflow.source.name", "mrcnn-trainer"},
                  {"job_name", job_name},
                  {"hosts", hosts},
                  {"processes", std::to_string(facts.processes)}};
  const bool log_model = EnvValue(env, "MLFLOW_LOG_MODEL") == "true" ||
                         EnvValue(env, "MLFLOW_LOG_MODEL") == "True" ||
                         EnvValue(env, "MLFLOW_LOG_MODEL") == "1";
  log.Line("[mlflow] tracking to " + endpoint.http.Describe() +
           (endpoint.sigv4 ? " (SageMaker MLflow, SigV4 for " + endpoint.sigv4->region + ")" : "") +
           (options.run_id.empty() ? ", experiment \"" + options.experiment_name + "\""
                                   : ", continuing run " + options.run_id));
  auto client = std::make_unique<tracking::MlflowClient>(std::move(endpoint), credentials);
  auto run = std::make_unique<tracking::MlflowRun>(
      std::move(client), std::move(options), [log](const std::string& line) { log.Line(line); });
  return std::make_unique<MlflowTrackingImpl>(job, std::move(run), run_file, log_model, log);
}

}  // namespace mrcnn::engine
