#pragma once
// Everything the server can be told, from flags first, then SageMaker's environment, then
// defaults. `server --help` lists the flags; the environment variables read are:
//   SAGEMAKER_BIND_TO_PORT              port (default 8080)
//   SAGEMAKER_MAX_PAYLOAD_IN_MB         request body limit in MiB, 1 to 1024 (default 6; 0, the
//                                       batch transform's "unlimited, chunked", means 1024)
//   SAGEMAKER_BATCH                     "true" in any case: a batch transform job (the defaults
//                                       below change); "false" or unset: not
//   SAGEMAKER_BATCH_STRATEGY            SINGLE_RECORD | MULTI_RECORD (also the API's spelling
//                                       SingleRecord | MultiRecord), for /execution-parameters
//                                       (default SINGLE_RECORD, MULTI_RECORD in a batch job)
//   SAGEMAKER_MAX_CONCURRENT_TRANSFORMS for /execution-parameters (default: workers × batch size)
//   SAGEMAKER_MODEL_SERVER_TIMEOUT      per-request deadline in seconds, 1 to 3600 (default
//                                       60; 600 in a batch job, the platform's default there)
//   MRCNN_MAX_IMAGE_PIXELS              decoded height*width limit (default 64 000 000)
//   SAGEMAKER_MULTI_MODEL               "true" in any case: a multi-model endpoint (starts with
//                                       no model; routes/multi_model_routes.h)
//   MRCNN_MME_MEMORY_BUDGET_MB          the models' memory budget there (default: 3/4 of the
//                                       container's memory limit, models/memory_limit.h)
//   MRCNN_MME_WORKSPACE_MB              activations charged per worker of a model (default 1024)
//   SAGEMAKER_MODEL_SERVER_WORKERS      model instances serving concurrently (default: see
//                                       ResolveWorkers below)
//   MRCNN_TILE_SIZE, MRCNN_TILE_OVERLAP, tiled inference of large images by default (tile side
//   MRCNN_TILE_FULL_IMAGE               0..16384, 0 = off; overlap 0..0.9; whole-image pass)
//   MRCNN_SERVING_DEVICE, MRCNN_SERVING_PRECISION, MRCNN_SERVING_MAX_BATCH,
//   MRCNN_SERVING_BATCH_WAIT_MS         the same as the flags, for `docker run -e`
//   SM_MODEL_DIR, SAGEMAKER_BASE_DIR    the model dir: --model-dir, else SM_MODEL_DIR, else
//                                       <base>/model, base = --base-dir, else
//                                       SAGEMAKER_BASE_DIR, else /opt/ml (as `train` uses);
//                                       when none of them is given and /opt/ml/model does not
//                                       exist, KServe's /mnt/models if it does
//   MRCNN_MODEL_NAME                    the model's name in /v2/models/{name} (--model_name,
//                                       default "model")
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>

#include "common/env_map.h"
#include "common/job_paths.h"
#include "serving/codec/image_decoding.h"
#include "serving/http/http_options.h"
#include "serving/models/inference_executor.h"
#include "serving/models/multi_model_loading.h"
#include "serving/models/predictor.h"
#include "serving/models/predictor_source.h"

namespace mrcnn::serving {

struct ServerConfig {
  std::string host = "0.0.0.0";
  uint16_t port = 8080;             // 0 = any free port (see port_file)
  std::filesystem::path port_file;  // when set, the bound port is written there (atomically)
  std::filesystem::path model_dir = "/opt/ml/model";
  std::string model_dir_source = "the default base dir /opt/ml";  // for the startup log
  std::string model_name = "model";  // the Open Inference Protocol's /v2/models/{name}
  std::string predictor = "auto";    // auto | model | statistics (a test facility)
  std::string device = "cpu";
  // auto (bf16 on a CPU with native bf16 dot products, else fp32), fp32, bf16, fp16 (CUDA).
  std::string precision = "auto";
  int num_threads = 0;  // torch intra-op threads per worker; 0: ResolveWorkers decides
  int workers = 0;      // model instances; 0: ResolveWorkers decides
  // Set by ResolveWorkers for the model on a CPU without --num-threads: the busy workers split
  // `cores` between them (models/core_share.h); num_threads then only sizes loading and warm-up.
  bool share_cores = false;
  int cores = 0;

  int io_threads = 2;
  int cpu_threads = 2;      // request decoding and response encoding
  BatchingPolicy batching;  // max_batch_images 0 (the parsed default): ResolveWorkers decides
  size_t max_inflight_requests = 128;  // admitted /invocations at once; beyond it 503

  size_t max_payload_bytes = 6u << 20;
  // A body (or a response) may take body_timeout (write_timeout) plus its size at this rate.
  double min_transfer_bytes_per_s = 1 << 20;
  bool batch_transform = false;          // SAGEMAKER_BATCH
  bool multi_model = false;              // SAGEMAKER_MULTI_MODEL
  uint64_t mme_memory_budget_bytes = 0;  // 0: 3/4 of ReadMemoryLimit(), decided at startup
  uint64_t mme_workspace_bytes = 1ull << 30;
  std::string batch_strategy = "SINGLE_RECORD";
  int max_concurrent_transforms = 0;  // 0: ResolveWorkers decides
  ImageLimits image_limits;
  size_t max_images_per_request = 16;
  PredictOptions default_options;
  int max_detections_cap = 1000;

  std::chrono::milliseconds idle_timeout{std::chrono::seconds(75)};
  std::chrono::milliseconds header_timeout{std::chrono::seconds(10)};
  std::chrono::milliseconds body_timeout{std::chrono::seconds(30)};
  std::chrono::milliseconds write_timeout{std::chrono::seconds(30)};
  std::chrono::milliseconds request_deadline{std::chrono::seconds(60)};
  std::chrono::milliseconds drain_timeout{std::chrono::seconds(25)};
  bool access_log = false;
};

// Thrown for --help or a malformed command line after CLI11 printed what to say.
struct CommandLineExit {
  int code = 0;
};

// The HTTP side's part of the config.
HttpOptions HttpOptionsOf(const ServerConfig& config);
// Where the single-model server's predictor comes from.
PredictorSource PredictorSourceOf(const ServerConfig& config);
// A multi-model endpoint's budget, and each model's plan: the model dir SageMaker names, one
// worker unless config.workers says more, the rest as ResolveWorkers decides. Copies config.
MultiModelSettings MultiModelSettingsOf(const ServerConfig& config, int cores);

// Where KServe's storage initializer puts the model.
inline constexpr char kKServeModelDir[] = "/mnt/models";
// `resolved` unless nothing named a model dir (`named` false: no --model-dir, --base-dir,
// SM_MODEL_DIR or SAGEMAKER_BASE_DIR), resolved.dir does not exist and kserve_dir does: then
// kserve_dir, so a KServe InferenceService serves its storageUri without any flag.
common::ResolvedModelDir PreferKServeModelDir(common::ResolvedModelDir resolved, bool named,
                                              const std::filesystem::path& kserve_dir);

// Throws common::ConfigError naming the flag or variable on a bad value, and CommandLineExit.
ServerConfig ParseServerConfig(int argc, char** argv, const common::EnvMap& env);

// Fills in what config leaves at 0: config.batching.workers from config.workers,
// config.num_threads, the batch size and max_concurrent_transforms (workers × batch size:
// what keeps every worker busy). The model on a CPU gets min(cores, 4) workers (four bounds
// the memory, ~1 GB each at 640x480) that share the cores by how many are busy
// (share_cores, models/core_share.h: a lone request uses every core, W concurrent ones cores / W
// each, since one forward's threads meet at a barrier after every op and W narrow workers
// beat one wide one on throughput), unless --num-threads fixes each worker's threads; and
// batches of one image: a batch costs the same per image as single images there, and a
// worker that took several makes all of them wait while its neighbours may idle
// (bench/RESULTS.md, serving). A GPU gets one worker with batches of up to 4 (batching is
// its parallelism), the statistics predictor one worker too. `cores`: UsableCores().
void ResolveWorkers(ServerConfig& config, const std::string& kind, int cores);

}  // namespace mrcnn::serving
