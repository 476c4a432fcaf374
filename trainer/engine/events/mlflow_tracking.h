#pragma once
// The training run in MLflow (issue 41), on rank 0, when MLFLOW_TRACKING_URI is set: an
// http(s) tracking server, or a SageMaker managed MLflow server's ARN (requests SigV4-signed
// with the job's credentials). The run is created in MLFLOW_EXPERIMENT_NAME (default: the
// training job's name, TRAINING_JOB_NAME, else "mask-rcnn"; created when missing), or
// MLFLOW_RUN_ID's run is continued; a resumed job continues the run it started (its id is kept
// in <checkpoint dir>/mlflow_run.json). Parameters: the resolved config flattened
// (SOLVER.BASE_LR ...) and the config sources; tags: job, hosts, processes, device,
// precision; metrics: every number of every metrics.jsonl record, with its iteration as the
// step (the same values); at the end the artifacts config.yaml, metrics.jsonl and report.html
// (and the model dir with MLFLOW_LOG_MODEL=true) through the server's artifact proxy, and the
// status FINISHED, FAILED (the failure's first line in the tag mrcnn.failure) or KILLED
// (SIGTERM). Tracking never slows or breaks training (tracking/mlflow_run.h): an unreachable
// server is a warning, the exit code is the job's, and what could not be sent is kept in
// <output>/mlflow_unsent.jsonl. Header is Torch-free.
#include <memory>
#include <string>

#include "trainer/engine/config/job_config.h"
#include "trainer/engine/events/console_log.h"
#include "trainer/engine/events/event_writer.h"
#include "trainer/engine/events/train_window.h"

namespace mrcnn::engine {

struct MlflowJobFacts {
  int processes = 1;
  std::string hosts;  // this host; SM_HOSTS's list replaces it when set
};

class MlflowTracking {
 public:
  // nullptr when MLFLOW_TRACKING_URI is unset (or empty). Throws common::ConfigError for a
  // URI of a form we cannot use; a build without tracking/ (no OpenSSL) logs that it cannot
  // track and returns nullptr.
  static std::unique_ptr<MlflowTracking> Start(const TrainJob& job, const MlflowJobFacts& facts,
                                               const ConsoleLog& log);
  virtual ~MlflowTracking() = default;

  // A tag known only once the job runs (device, precision).
  virtual void Tag(const std::string& key, const std::string& value) = 0;
  // The writer that turns metrics.jsonl's records into the run's metrics.
  virtual std::unique_ptr<EventWriter> Writer(TrainWindowSpec spec, int64_t start_iter) = 0;
  // Uploads the artifacts, sets the status; later calls do nothing. `failure`: what went
  // wrong, for FAILED.
  virtual void Finish(const std::string& status, const std::string& failure = {}) = 0;
};

}  // namespace mrcnn::engine
