#include <catch2/catch.hpp>

#include "common/config_error.h"
#include "serving/server_config.h"

using namespace mrcnn::serving;

namespace {

ServerConfig Parse(std::vector<std::string> args, const mrcnn::common::EnvMap& env) {
  args.insert(args.begin(), "server");
  std::vector<char*> argv;
  for (auto& arg : args) {
    argv.push_back(arg.data());
  }
  return ParseServerConfig(static_cast<int>(argv.size()), argv.data(), env);
}

}  // namespace

TEST_CASE("SageMaker's environment configures the server, flags override it", "[serving][config]") {
  const ServerConfig defaults = Parse({}, {});
  CHECK(defaults.port == 8080);
  CHECK(defaults.max_payload_bytes == 6u << 20);
  CHECK(defaults.batch_strategy == "SINGLE_RECORD");
  CHECK(defaults.max_concurrent_transforms == 0);  // ResolveWorkers decides
  CHECK(defaults.batching.max_batch_images == 0);
  CHECK(defaults.request_deadline == std::chrono::seconds(60));
  CHECK(defaults.drain_timeout == std::chrono::seconds(25));

  const mrcnn::common::EnvMap env = {
      {"SAGEMAKER_BIND_TO_PORT", "9090"},           {"SAGEMAKER_MAX_PAYLOAD_IN_MB", "20"},
      {"SAGEMAKER_BATCH_STRATEGY", "MULTI_RECORD"}, {"SAGEMAKER_MAX_CONCURRENT_TRANSFORMS", "7"},
      {"SAGEMAKER_MODEL_SERVER_TIMEOUT", "30"},     {"MRCNN_SERVING_MAX_BATCH", "8"}};
  const ServerConfig from_env = Parse({}, env);
  CHECK(from_env.port == 9090);
  CHECK(from_env.max_payload_bytes == 20u << 20);
  CHECK(from_env.batch_strategy == "MULTI_RECORD");
  CHECK(from_env.max_concurrent_transforms == 7);
  CHECK(from_env.request_deadline == std::chrono::seconds(30));
  CHECK(from_env.batching.max_batch_images == 8);

  const ServerConfig flagged =
      Parse({"--port", "0", "--max-payload-mb", "1", "--max-batch", "2"}, env);
  CHECK(flagged.port == 0);
  CHECK(flagged.max_payload_bytes == 1u << 20);
  CHECK(flagged.batching.max_batch_images == 2);

  CHECK_THROWS_AS(Parse({}, {{"SAGEMAKER_BIND_TO_PORT", "http"}}), mrcnn::common::ConfigError);
  CHECK_THROWS_AS(Parse({}, {{"SAGEMAKER_BATCH_STRATEGY", "SOMETIMES"}}),
                  mrcnn::common::ConfigError);
  CHECK_THROWS_AS(Parse({"--header-timeout-s", "0"}, {}), mrcnn::common::ConfigError);
  CHECK_THROWS_AS(Parse({"--no-such-flag"}, {}), CommandLineExit);
}

TEST_CASE("workers and intra-op threads: one per core for the model on a CPU, else one worker",
          "[serving][config]") {
  ServerConfig model_cpu = Parse({"--predictor", "model"}, {});
  CHECK(model_cpu.workers == 0);  // decided once the predictor kind is known
  ResolveWorkers(model_cpu, "model", 2);
  CHECK(model_cpu.workers == 2);
  CHECK(model_cpu.batching.workers == 2);
  CHECK(model_cpu.num_threads == 1);  // for loading and warm-up; then the busy workers share
  CHECK(model_cpu.share_cores);
  CHECK(model_cpu.cores == 2);
  CHECK(model_cpu.batching.max_batch_images == 1);  // no gain per image on a CPU
  CHECK(model_cpu.max_concurrent_transforms == 2);

  ServerConfig many_cores = Parse({}, {});
  ResolveWorkers(many_cores, "model", 16);
  CHECK(many_cores.workers == 4);  // memory bound: ~1 GB per worker
  CHECK(many_cores.num_threads == 4);

  ServerConfig gpu = Parse({"--device", "cuda"}, {});
  ResolveWorkers(gpu, "model", 16);
  CHECK(gpu.batching.workers == 1);
  CHECK(gpu.num_threads == 0);  // torch's default
  CHECK_FALSE(gpu.share_cores);
  CHECK(gpu.batching.max_batch_images == 4);
  CHECK(gpu.max_concurrent_transforms == 4);

  ServerConfig batched =
      Parse({"--max-batch", "3"}, {{"SAGEMAKER_MAX_CONCURRENT_TRANSFORMS", "5"}});
  ResolveWorkers(batched, "model", 2);
  CHECK(batched.batching.max_batch_images == 3);  // given: kept
  CHECK(batched.max_concurrent_transforms == 5);

  ServerConfig statistics = Parse({}, {});
  ResolveWorkers(statistics, "statistics", 16);
  CHECK(statistics.batching.workers == 1);
  CHECK_FALSE(statistics.share_cores);

  ServerConfig from_env = Parse({}, {{"SAGEMAKER_MODEL_SERVER_WORKERS", "3"}});
  ResolveWorkers(from_env, "model", 2);
  CHECK(from_env.batching.workers == 3);
  CHECK(from_env.num_threads == 1);

  ServerConfig flagged =
      Parse({"--workers", "1", "--num-threads", "2"}, {{"SAGEMAKER_MODEL_SERVER_WORKERS", "3"}});
  ResolveWorkers(flagged, "model", 2);
  CHECK(flagged.batching.workers == 1);
  CHECK(flagged.num_threads == 2);
  CHECK_FALSE(flagged.share_cores);  // --num-threads fixes each worker's threads

  CHECK_THROWS_AS(Parse({}, {{"SAGEMAKER_MODEL_SERVER_WORKERS", "many"}}),
                  mrcnn::common::ConfigError);
}

TEST_CASE("model dir: --model-dir, else SM_MODEL_DIR, else <base>/model as train resolves base",
          "[serving][config]") {
  const ServerConfig defaults = Parse({}, {});
  CHECK(defaults.model_dir == "/opt/ml/model");
  CHECK(defaults.model_dir_source == "the default base dir /opt/ml");

  const ServerConfig from_base_env = Parse({}, {{"SAGEMAKER_BASE_DIR", "/jobs/ml"}});
  CHECK(from_base_env.model_dir == "/jobs/ml/model");
  CHECK(from_base_env.model_dir_source == "SAGEMAKER_BASE_DIR=/jobs/ml");

  const ServerConfig from_base_flag =
      Parse({"--base-dir", "/flag/ml"}, {{"SAGEMAKER_BASE_DIR", "/jobs/ml"}});
  CHECK(from_base_flag.model_dir == "/flag/ml/model");
  CHECK(from_base_flag.model_dir_source == "--base-dir /flag/ml");

  const mrcnn::common::EnvMap both = {{"SAGEMAKER_BASE_DIR", "/jobs/ml"},
                                      {"SM_MODEL_DIR", "/sm/model"}};
  CHECK(Parse({"--base-dir", "/flag/ml"}, both).model_dir == "/sm/model");
  CHECK(Parse({}, both).model_dir_source == "SM_MODEL_DIR");
  const ServerConfig flagged = Parse({"--model-dir", "/mine", "--base-dir", "/flag/ml"}, both);
  CHECK(flagged.model_dir == "/mine");
  CHECK(flagged.model_dir_source == "--model-dir");

  // Empty values count as unset, as for the base dir.
  CHECK(Parse({}, {{"SM_MODEL_DIR", ""}, {"SAGEMAKER_BASE_DIR", ""}}).model_dir == "/opt/ml/model");
}

TEST_CASE("batch transform: SAGEMAKER_BATCH in any case, the strategy in either spelling",
          "[serving][config][batch]") {
  for (const char* yes : {"true", "TRUE", "True", "tRuE"}) {
    INFO(yes);
    const ServerConfig batch = Parse({}, {{"SAGEMAKER_BATCH", yes}});
    CHECK(batch.batch_transform);
    CHECK(batch.batch_strategy == "MULTI_RECORD");  // what the server does best in a batch job
    CHECK(batch.request_deadline == std::chrono::seconds(600));  // batch transform's default
  }
  for (const char* no : {"false", "FALSE", "False", ""}) {
    INFO(no);
    const ServerConfig single = Parse({}, {{"SAGEMAKER_BATCH", no}});
    CHECK_FALSE(single.batch_transform);
    CHECK(single.batch_strategy == "SINGLE_RECORD");
    CHECK(single.request_deadline == std::chrono::seconds(60));
  }
  CHECK_THROWS_AS(Parse({}, {{"SAGEMAKER_BATCH", "yes"}}), mrcnn::common::ConfigError);
  CHECK_THROWS_AS(Parse({}, {{"SAGEMAKER_BATCH", "1"}}), mrcnn::common::ConfigError);

  // The job's own settings win over the batch defaults.
  const ServerConfig told = Parse({}, {{"SAGEMAKER_BATCH", "true"},
                                       {"SAGEMAKER_BATCH_STRATEGY", "SingleRecord"},
                                       {"SAGEMAKER_MODEL_SERVER_TIMEOUT", "3600"}});
  CHECK(told.batch_strategy == "SINGLE_RECORD");
  CHECK(told.request_deadline == std::chrono::seconds(3600));
  CHECK(Parse({}, {{"SAGEMAKER_BATCH_STRATEGY", "MultiRecord"}}).batch_strategy == "MULTI_RECORD");
  CHECK(Parse({}, {{"SAGEMAKER_BATCH_STRATEGY", "multi_record"}}).batch_strategy == "MULTI_RECORD");
  CHECK(Parse({"--batch-strategy", "SingleRecord"}, {}).batch_strategy == "SINGLE_RECORD");
  CHECK_THROWS_AS(Parse({"--batch-strategy", "ALL"}, {}), mrcnn::common::ConfigError);
  CHECK_THROWS_AS(Parse({}, {{"SAGEMAKER_MODEL_SERVER_TIMEOUT", "3601"}}),
                  mrcnn::common::ConfigError);
}

TEST_CASE("large payloads: up to 1024 MiB, and the decoded-pixel limit is a setting",
          "[serving][config][limits]") {
  CHECK(Parse({}, {{"SAGEMAKER_MAX_PAYLOAD_IN_MB", "1024"}}).max_payload_bytes == 1024u << 20);
  // 0 is batch transform's "arbitrarily large": the largest limit.
  CHECK(Parse({}, {{"SAGEMAKER_MAX_PAYLOAD_IN_MB", "0"}}).max_payload_bytes == 1024u << 20);
  CHECK_THROWS_AS(Parse({}, {{"SAGEMAKER_MAX_PAYLOAD_IN_MB", "1025"}}), mrcnn::common::ConfigError);
  CHECK_THROWS_AS(Parse({"--max-payload-mb", "2000"}, {}), CommandLineExit);

  const ServerConfig defaults = Parse({}, {});
  CHECK(defaults.image_limits.max_pixels >= 8000 * 6000);  // aerial images fit
  CHECK(defaults.image_limits.max_side < 60000);           // the PNG bomb's side does not
  CHECK(Parse({}, {{"MRCNN_MAX_IMAGE_PIXELS", "1000000"}}).image_limits.max_pixels == 1000000);
  CHECK(Parse({"--max-image-pixels", "5000"}, {{"MRCNN_MAX_IMAGE_PIXELS", "1000000"}})
            .image_limits.max_pixels == 5000);
  CHECK_THROWS_AS(Parse({}, {{"MRCNN_MAX_IMAGE_PIXELS", "0"}}), mrcnn::common::ConfigError);
  CHECK_THROWS_AS(Parse({}, {{"MRCNN_MAX_IMAGE_PIXELS", "lots"}}), mrcnn::common::ConfigError);

  CHECK(defaults.min_transfer_bytes_per_s == 1 << 20);
  CHECK(Parse({"--min-transfer-rate-mb-s", "8"}, {}).min_transfer_bytes_per_s == 8 << 20);
}

TEST_CASE("The Open Inference Protocol's model name and KServe's model dir", "[serving][config]") {
  CHECK(Parse({}, {}).model_name == "model");
  CHECK(Parse({}, {{"MRCNN_MODEL_NAME", "detector"}}).model_name == "detector");
  CHECK(Parse({"--model_name", "site-a"}, {{"MRCNN_MODEL_NAME", "detector"}}).model_name ==
        "site-a");
  CHECK(Parse({"--model-name=site-b"}, {}).model_name == "site-b");
  CHECK_THROWS_AS(Parse({"--model_name", "a/b"}, {}), mrcnn::common::ConfigError);
  CHECK(Parse({"--model_dir", "/srv/m", "--http_port", "9000"}, {}).model_dir == "/srv/m");
  CHECK(Parse({"--http_port", "9000"}, {}).port == 9000);

  const std::filesystem::path here = std::filesystem::current_path();
  const mrcnn::common::ResolvedModelDir missing{"/nonexistent/opt/ml/model", "default"};
  // Nothing named a dir, the default is missing and KServe's exists: KServe's.
  CHECK(PreferKServeModelDir(missing, false, here).dir == here);
  CHECK(PreferKServeModelDir(missing, false, here).source.find("KServe") != std::string::npos);
  // A named dir, an existing default, or no KServe dir: as resolved.
  CHECK(PreferKServeModelDir(missing, true, here).dir == missing.dir);
  CHECK(PreferKServeModelDir({here, "default"}, false, "/nonexistent/mnt").dir == here);
  CHECK(PreferKServeModelDir(missing, false, "/nonexistent/mnt").dir == missing.dir);
}
