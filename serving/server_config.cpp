#include "serving/server_config.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <charconv>
#include <optional>

#include "common/config_error.h"
#include "common/job_paths.h"
#include "serving/codec/request_decoding.h"
#include "serving/models/core_share.h"

namespace mrcnn::serving {
namespace {

constexpr int64_t kMaxPayloadMb = 1024;
constexpr int64_t kMaxImagePixels = int64_t{1} << 34;

// env[key] within [min, max], or `fallback` when unset or empty (the fallback may lie
// outside the range: 0 often means "decide later").
int64_t EnvIntegerOr(const common::EnvMap& env, const std::string& key, int64_t fallback,
                     int64_t min, int64_t max) {
  return common::EnvInteger(env, key, min, max).value_or(fallback);
}

double EnvNumber(const common::EnvMap& env, const std::string& key, double fallback, double min,
                 double max) {
  const auto value = common::Lookup(env, key);
  if (!value || value->empty()) {
    return fallback;
  }
  double parsed = 0.0;
  auto [end, ec] = std::from_chars(value->data(), value->data() + value->size(), parsed);
  if (ec != std::errc() || end != value->data() + value->size() ||
      !(parsed >= min && parsed <= max)) {
    throw common::ConfigError(
        "environment", key,
        fmt::format("must be a number in [{}, {}], got \"{}\"", min, max, *value));
  }
  return parsed;
}

std::string EnvString(const common::EnvMap& env, const std::string& key, std::string fallback) {
  const auto value = common::Lookup(env, key);
  return value && !value->empty() ? *value : fallback;
}

std::string Upper(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return text;
}

// SageMaker sets "true"; other toolkits compare lower-cased. Anything but true/false is a
// mistake worth stopping for rather than a silent "not a batch job".
bool EnvBool(const common::EnvMap& env, const std::string& key) {
  const std::string value = Upper(EnvString(env, key, "false"));
  if (value == "TRUE") {
    return true;
  }
  if (value == "FALSE") {
    return false;
  }
  throw common::ConfigError(
      "environment", key,
      fmt::format("must be true or false (any case), got \"{}\"", *common::Lookup(env, key)));
}

// AWS's execution-parameters spelling from either spelling: SINGLE_RECORD / MULTI_RECORD,
// or the CreateTransformJob API's SingleRecord / MultiRecord, in any case.
std::string NormalizeBatchStrategy(const std::string& value, const char* source, const char* name) {
  std::string key = Upper(value);
  std::erase(key, '_');
  if (key == "SINGLERECORD") {
    return "SINGLE_RECORD";
  }
  if (key == "MULTIRECORD") {
    return "MULTI_RECORD";
  }
  throw common::ConfigError(
      source, name,
      fmt::format("must be SINGLE_RECORD or MULTI_RECORD (or SingleRecord / MultiRecord), got "
                  "\"{}\"",
                  value));
}

// What SageMaker's (and our) environment variables say; the defaults where they are unset.
ServerConfig ConfigFromEnvironment(const common::EnvMap& env) {
  ServerConfig config;
  config.port = static_cast<uint16_t>(EnvIntegerOr(env, "SAGEMAKER_BIND_TO_PORT", 8080, 0, 65535));
  // 1024 MiB is SageMaker's largest payload (async inference); 0 is batch transform's
  // "arbitrarily large, chunked", served with that same largest limit.
  int64_t payload_mb = EnvIntegerOr(env, "SAGEMAKER_MAX_PAYLOAD_IN_MB", 6, 0, kMaxPayloadMb);
  config.max_payload_bytes =
      static_cast<size_t>((payload_mb == 0 ? kMaxPayloadMb : payload_mb) << 20);
  config.batch_transform = EnvBool(env, "SAGEMAKER_BATCH");
  config.multi_model = EnvBool(env, "SAGEMAKER_MULTI_MODEL");
  config.mme_memory_budget_bytes =
      static_cast<uint64_t>(EnvIntegerOr(env, "MRCNN_MME_MEMORY_BUDGET_MB", 0, 1, 1 << 24)) << 20;
  config.mme_workspace_bytes =
      static_cast<uint64_t>(EnvIntegerOr(env, "MRCNN_MME_WORKSPACE_MB", 1024, 0, 1 << 20)) << 20;
  config.batch_strategy = NormalizeBatchStrategy(
      EnvString(env, "SAGEMAKER_BATCH_STRATEGY",
                config.batch_transform ? "MULTI_RECORD" : config.batch_strategy),
      "environment", "SAGEMAKER_BATCH_STRATEGY");
  config.max_concurrent_transforms =
      static_cast<int>(EnvIntegerOr(env, "SAGEMAKER_MAX_CONCURRENT_TRANSFORMS", 0, 0, 100000));
  // A multi-record request carries many images; batch transform waits 600 s by default.
  config.request_deadline = std::chrono::seconds(EnvIntegerOr(
      env, "SAGEMAKER_MODEL_SERVER_TIMEOUT", config.batch_transform ? 600 : 60, 1, 3600));
  config.image_limits.max_pixels = EnvIntegerOr(env, "MRCNN_MAX_IMAGE_PIXELS",
                                                config.image_limits.max_pixels, 1, kMaxImagePixels);
  config.workers =
      static_cast<int>(EnvIntegerOr(env, "SAGEMAKER_MODEL_SERVER_WORKERS", 0, 0, 1024));
  config.device = EnvString(env, "MRCNN_SERVING_DEVICE", config.device);
  config.precision = EnvString(env, "MRCNN_SERVING_PRECISION", config.precision);
  config.batching.max_batch_images =
      static_cast<int>(EnvIntegerOr(env, "MRCNN_SERVING_MAX_BATCH", 0, 1, 1024));  // 0: see below
  config.batching.max_wait =
      std::chrono::milliseconds(EnvIntegerOr(env, "MRCNN_SERVING_BATCH_WAIT_MS", 5, 0, 10000));
  // Tiled inference of large images, off unless asked for (per request:
  // X-Amzn-SageMaker-Custom-Attributes tile_size=..., tile_overlap=...).
  config.default_options.tile_size = EnvIntegerOr(env, "MRCNN_TILE_SIZE", 0, 0, kMaxTileSize);
  config.default_options.tile_overlap = static_cast<float>(
      EnvNumber(env, "MRCNN_TILE_OVERLAP", config.default_options.tile_overlap, 0.0, 0.9));
  config.default_options.tile_full_image = EnvBool(env, "MRCNN_TILE_FULL_IMAGE");
  config.model_name = EnvString(env, "MRCNN_MODEL_NAME", config.model_name);
  const int cores = std::max(2, UsableCores());
  config.cpu_threads = cores;
  config.io_threads = std::clamp(cores / 4, 2, 8);

  return config;
}

// The model and the threads that run it.
void AddModelOptions(CLI::App& app, ServerConfig& config) {
  app.add_option("--model-name,--model_name", config.model_name,
                 "the model's name in the Open Inference Protocol's /v2/models/{name} routes "
                 "(MRCNN_MODEL_NAME; default \"model\"; KServe passes --model_name)");
  app.add_option("--predictor", config.predictor,
                 "model | statistics | auto (auto = statistics when the model dir holds "
                 "statistics_predictor.json; `statistics` is a deterministic TEST predictor)")
      ->check(CLI::IsMember({"auto", "model", "statistics"}));
  app.add_option("--device", config.device, "cpu, cuda or cuda:N (MRCNN_SERVING_DEVICE)");
  app.add_option("--precision", config.precision,
                 "auto, fp32, fp32-fast (CPU), bf16, or fp16 on CUDA (MRCNN_SERVING_PRECISION); "
                 "auto is bf16 on a CPU with AVX512_BF16, AMX or (arm64) BF16, fp32-fast on "
                 "other CPUs, fp32 on CUDA")
      ->check(CLI::IsMember({"auto", "fp32", "fp32-fast", "fp16", "bf16"}));
  app.add_option("--num-threads", config.num_threads,
                 "torch intra-op threads per worker (0 = on a CPU, the busy workers share the "
                 "cores: a lone request uses them all)")
      ->check(CLI::Range(0, 1024));
  app.add_option("--workers", config.workers,
                 "model instances serving concurrently (SAGEMAKER_MODEL_SERVER_WORKERS; 0 = "
                 "min(cores, 4) for the model on a CPU, else 1)")
      ->check(CLI::Range(0, 1024));
  app.add_option("--io-threads", config.io_threads, "HTTP I/O threads")->check(CLI::Range(1, 64));
  app.add_option("--cpu-threads", config.cpu_threads, "decode/encode threads")
      ->check(CLI::Range(1, 256));
}

// What a request may carry and what it gets by default.
void AddRequestOptions(CLI::App& app, ServerConfig& config) {
  app.add_option("--max-image-pixels", config.image_limits.max_pixels,
                 "decoded height*width limit, checked from the image header before decoding "
                 "(MRCNN_MAX_IMAGE_PIXELS; default 64000000, an 8000x6000 aerial image fits)")
      ->check(CLI::Range(int64_t{1}, kMaxImagePixels));
  app.add_option("--max-image-side", config.image_limits.max_side, "per-side limit")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_option("--max-images-per-request", config.max_images_per_request,
                 "images in one JSON list request")
      ->check(CLI::Range(1, 10000));
  app.add_option("--score-threshold", config.default_options.score_threshold,
                 "default when the request does not say")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--max-detections", config.default_options.max_detections,
                 "default when the request does not say")
      ->check(CLI::Range(1, 100000));
  app.add_option("--tile-size", config.default_options.tile_size,
                 "tiled inference of large images: default tile side in pixels, 0 for none "
                 "(MRCNN_TILE_SIZE; per request: custom attribute tile_size)")
      ->check(CLI::Range(int64_t{0}, kMaxTileSize));
  app.add_option("--tile-overlap", config.default_options.tile_overlap,
                 "default fraction of a tile shared with each neighbour (MRCNN_TILE_OVERLAP, 0.2)")
      ->check(CLI::Range(0.0, 0.9));
  app.add_flag("--tile-full-image", config.default_options.tile_full_image,
               "with tiles, also run the whole image at the test size (MRCNN_TILE_FULL_IMAGE)");
  app.add_option("--max-detections-cap", config.max_detections_cap,
                 "largest max_detections a request may ask for")
      ->check(CLI::Range(1, 100000));
}

// A path segment of /v2/models/{name}: non-empty, no '/' or control characters.
void RequireModelName(const std::string& name) {
  if (name.empty() || name.size() > 1024 || std::any_of(name.begin(), name.end(), [](char c) {
        return c == '/' || static_cast<unsigned char>(c) < 0x20;
      })) {
    throw common::ConfigError("command line or environment", "--model_name / MRCNN_MODEL_NAME",
                              "must be 1 to 1024 bytes without '/' or control characters");
  }
}

// The model dir as `train` resolves it, or KServe's when nothing named one.
common::ResolvedModelDir ServedModelDir(const std::optional<std::string>& model_dir,
                                        const std::optional<std::string>& base_dir,
                                        const common::EnvMap& env) {
  const bool named = (model_dir && !model_dir->empty()) || (base_dir && !base_dir->empty()) ||
                     !common::Lookup(env, "SM_MODEL_DIR").value_or("").empty() ||
                     !common::Lookup(env, "SAGEMAKER_BASE_DIR").value_or("").empty();
  return PreferKServeModelDir(common::ResolveModelDir(model_dir, base_dir, env), named,
                              kKServeModelDir);
}

// A timeout flag's seconds, checked.
std::chrono::milliseconds SecondsFlag(double seconds, const char* flag) {
  if (!(seconds > 0.0) || seconds > 86400.0) {
    throw common::ConfigError("command line", flag, "must be in (0, 86400] seconds");
  }
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000.0));
}

}  // namespace

common::ResolvedModelDir PreferKServeModelDir(common::ResolvedModelDir resolved, bool named,
                                              const std::filesystem::path& kserve_dir) {
  std::error_code error;
  if (named || std::filesystem::is_directory(resolved.dir, error) ||
      !std::filesystem::is_directory(kserve_dir, error)) {
    return resolved;
  }
  return {kserve_dir,
          fmt::format("KServe's {} (no {})", kserve_dir.string(), resolved.dir.string())};
}

HttpOptions HttpOptionsOf(const ServerConfig& config) {
  HttpOptions options;
  options.host = config.host;
  options.port = config.port;
  options.io_threads = config.io_threads;
  options.max_payload_bytes = config.max_payload_bytes;
  options.min_transfer_bytes_per_s = config.min_transfer_bytes_per_s;
  options.idle_timeout = config.idle_timeout;
  options.header_timeout = config.header_timeout;
  options.body_timeout = config.body_timeout;
  options.write_timeout = config.write_timeout;
  options.drain_timeout = config.drain_timeout;
  options.access_log = config.access_log;
  return options;
}

ServerConfig ParseServerConfig(int argc, char** argv, const common::EnvMap& env) {
  // Environment first; flags given on the command line override it below.
  ServerConfig config = ConfigFromEnvironment(env);
  CLI::App app{
      "Mask R-CNN inference server (SageMaker serving contract: /ping, /invocations, "
      "/execution-parameters)",
      "server"};
  std::optional<std::string> model_dir;
  std::optional<std::string> base_dir;
  std::string port_file;
  double payload_mb_flag = static_cast<double>(config.max_payload_bytes) / (1 << 20);
  double transfer_mb_s = config.min_transfer_bytes_per_s / (1 << 20);
  int max_batch = config.batching.max_batch_images;
  double batch_wait_ms = static_cast<double>(config.batching.max_wait.count()) / 1000.0;
  size_t queue_capacity = config.batching.queue_capacity;
  double idle_s = 75, header_s = 10, body_s = 30, write_s = 30, drain_s = 25;
  double deadline_s = static_cast<double>(config.request_deadline.count()) / 1000.0;
  app.add_option("--host", config.host, "address to bind (0.0.0.0; tests use 127.0.0.1)");
  app.add_option("--port,--http_port", config.port,
                 "port (SAGEMAKER_BIND_TO_PORT, else 8080; 0 = any)");
  app.add_option("--port-file", port_file, "write the bound port to this file once listening");
  app.add_option("--model-dir,--model_dir", model_dir,
                 "model directory (default: $SM_MODEL_DIR, else <base dir>/model, else "
                 "KServe's /mnt/models when that exists and <base dir>/model does not)");
  app.add_option("--base-dir", base_dir,
                 "job tree root whose model/ is served when neither --model-dir nor "
                 "SM_MODEL_DIR is given (default: $SAGEMAKER_BASE_DIR, else /opt/ml)");
  AddModelOptions(app, config);
  app.add_option("--max-batch", max_batch,
                 "images per inference batch (MRCNN_SERVING_MAX_BATCH; default 1 for the model on "
                 "a CPU, else 4)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--batch-wait-ms", batch_wait_ms,
                 "how long the oldest request may wait for a batch to fill")
      ->check(CLI::Range(0.0, 10000.0));
  app.add_option("--queue-capacity", queue_capacity, "requests waiting for the model; beyond: 503")
      ->check(CLI::Range(1, 100000));
  app.add_option("--max-inflight", config.max_inflight_requests,
                 "requests admitted at once (decoding, queued, running, encoding); beyond: 503")
      ->check(CLI::Range(1, 100000));
  app.add_option("--max-payload-mb", payload_mb_flag,
                 "body limit in MiB, at most 1024 (SAGEMAKER_MAX_PAYLOAD_IN_MB)")
      ->check(CLI::Range(0.001, static_cast<double>(kMaxPayloadMb)));
  app.add_option("--min-transfer-rate-mb-s", transfer_mb_s,
                 "a body may take --body-timeout-s plus its size at this rate in MiB/s (a "
                 "response likewise with --write-timeout-s)")
      ->check(CLI::Range(0.001, 1e6));
  app.add_flag("--multi-model", config.multi_model,
               "a multi-model endpoint: start with no model, load them with POST /models "
               "(SAGEMAKER_MULTI_MODEL=true)");
  app.add_option("--batch-strategy", config.batch_strategy,
                 "SINGLE_RECORD or MULTI_RECORD (SAGEMAKER_BATCH_STRATEGY; default "
                 "SINGLE_RECORD, MULTI_RECORD when SAGEMAKER_BATCH=true)");
  app.add_option("--max-concurrent-transforms", config.max_concurrent_transforms,
                 "reported by /execution-parameters (SAGEMAKER_MAX_CONCURRENT_TRANSFORMS)")
      ->check(CLI::Range(0, 100000));
  AddRequestOptions(app, config);
  app.add_option("--idle-timeout-s", idle_s, "keep-alive idle time before closing");
  app.add_option("--header-timeout-s", header_s, "time to receive a request's headers");
  app.add_option("--body-timeout-s", body_s, "time to receive a request's body");
  app.add_option("--write-timeout-s", write_s, "time to send a response");
  app.add_option("--request-deadline-s", deadline_s,
                 "answer /invocations within this time (SAGEMAKER_MODEL_SERVER_TIMEOUT)");
  app.add_option("--drain-timeout-s", drain_s, "on SIGTERM, wait this long for in-flight work");
  app.add_flag("--access-log", config.access_log, "one line per request on stderr");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    throw CommandLineExit{app.exit(e)};
  }

  RequireModelName(config.model_name);
  auto resolved = ServedModelDir(model_dir, base_dir, env);
  config.model_dir = std::move(resolved.dir);
  config.model_dir_source = std::move(resolved.source);
  config.port_file = port_file;
  config.max_payload_bytes = static_cast<size_t>(payload_mb_flag * (1 << 20));
  config.min_transfer_bytes_per_s = transfer_mb_s * (1 << 20);
  config.batching.max_batch_images = max_batch;
  config.batching.max_wait =
      std::chrono::microseconds(static_cast<int64_t>(batch_wait_ms * 1000.0));
  config.batching.queue_capacity = queue_capacity;
  config.idle_timeout = SecondsFlag(idle_s, "--idle-timeout-s");
  config.header_timeout = SecondsFlag(header_s, "--header-timeout-s");
  config.body_timeout = SecondsFlag(body_s, "--body-timeout-s");
  config.write_timeout = SecondsFlag(write_s, "--write-timeout-s");
  config.request_deadline = SecondsFlag(deadline_s, "--request-deadline-s");
  config.drain_timeout = SecondsFlag(drain_s, "--drain-timeout-s");
  config.batch_strategy =
      NormalizeBatchStrategy(config.batch_strategy, "command line", "--batch-strategy");
  if (config.default_options.max_detections > config.max_detections_cap) {
    config.max_detections_cap = config.default_options.max_detections;
  }
  config.default_options.max_detections_cap = config.max_detections_cap;
  return config;
}

void ResolveWorkers(ServerConfig& config, const std::string& kind, int cores) {
  cores = std::max(cores, 1);
  const bool model_on_cpu = kind == "model" && config.device == "cpu";
  if (config.workers <= 0) {
    config.workers = model_on_cpu ? std::min(cores, 4) : 1;
  }
  config.batching.workers = config.workers;
  config.cores = cores;
  config.share_cores = model_on_cpu && config.num_threads <= 0;
  if (config.num_threads <= 0 && model_on_cpu) {
    config.num_threads = std::max(1, cores / config.workers);
  }
  if (config.batching.max_batch_images <= 0) {
    config.batching.max_batch_images = model_on_cpu ? 1 : 4;
  }
  if (config.max_concurrent_transforms <= 0) {
    config.max_concurrent_transforms = config.workers * config.batching.max_batch_images;
  }
}

PredictorSource PredictorSourceOf(const ServerConfig& config) {
  return PredictorSource{config.predictor, config.model_dir, config.model_dir_source,
                         config.device,    config.precision, config.num_threads};
}

MultiModelSettings MultiModelSettingsOf(const ServerConfig& config, int cores) {
  MultiModelSettings settings;
  settings.memory_budget_bytes = config.mme_memory_budget_bytes;
  settings.workspace_bytes = config.mme_workspace_bytes;
  settings.plan = [config, cores](const std::filesystem::path& dir) {
    ServerConfig model = config;
    model.model_dir = dir;
    model.model_dir_source = "POST /models";
    if (model.workers == 0)
      model.workers = 1;
    ResolveWorkers(model, ResolvePredictorKind(PredictorSourceOf(model)), cores);
    return HostedModelPlan{PredictorSourceOf(model), model.batching,
                           model.share_cores ? std::optional<int>(model.cores) : std::nullopt};
  };
  return settings;
}

}  // namespace mrcnn::serving
