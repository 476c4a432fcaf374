// inputdataconfig.json, checkpointconfig.json, the job paths, GPU counting and
// LoadJobEnvironment as a whole.
#include <catch2/catch.hpp>

#include "common/checkpoint_config.h"
#include "common/config_error.h"
#include "common/input_data_config.h"
#include "common/job_environment.h"
#include "common/job_paths.h"
#include "job_tree.h"

using namespace mrcnn::common;
using mrcnn::common::testing::JobTree;

TEST_CASE("job paths: the SageMaker layout under the base dir", "[paths]") {
  const auto p = MakeJobPaths("/x/ml");
  CHECK(p.base == "/x/ml");
  CHECK(p.input == "/x/ml/input");
  CHECK(p.input_config == "/x/ml/input/config");
  CHECK(p.input_data == "/x/ml/input/data");
  CHECK(p.model == "/x/ml/model");
  CHECK(p.output == "/x/ml/output");
  CHECK(p.output_data == "/x/ml/output/data");
  CHECK(p.output_intermediate == "/x/ml/output/intermediate");
  CHECK(p.failure == "/x/ml/output/failure");
  CHECK(p.code == "/x/ml/code");
  CHECK(p.checkpoints == "/x/ml/checkpoints");
}

TEST_CASE("job paths: --base-dir beats SAGEMAKER_BASE_DIR beats /opt/ml", "[paths]") {
  const EnvMap env = {{"SAGEMAKER_BASE_DIR", "/env/ml"}};
  CHECK(ResolveBaseDir(std::string("/flag/ml"), env) == "/flag/ml");
  CHECK(ResolveBaseDir(std::nullopt, env) == "/env/ml");
  CHECK(ResolveBaseDir(std::nullopt, {}) == "/opt/ml");
  CHECK(ResolveBaseDir(std::nullopt, {{"SAGEMAKER_BASE_DIR", ""}}) == "/opt/ml");
}

TEST_CASE("job paths: model dir is --model-dir, SM_MODEL_DIR, then <base>/model", "[paths]") {
  const EnvMap base_only = {{"SAGEMAKER_BASE_DIR", "/env/ml"}};
  const auto from_base = ResolveModelDir(std::nullopt, std::nullopt, base_only);
  CHECK(from_base.dir == "/env/ml/model");
  CHECK(from_base.source == "SAGEMAKER_BASE_DIR=/env/ml");
  CHECK(ResolveModelDir(std::nullopt, std::string("/flag/ml"), base_only).dir == "/flag/ml/model");
  CHECK(ResolveModelDir(std::nullopt, std::nullopt, {}).dir == "/opt/ml/model");
  const EnvMap sm = {{"SAGEMAKER_BASE_DIR", "/env/ml"}, {"SM_MODEL_DIR", "/sm/model"}};
  CHECK(ResolveModelDir(std::nullopt, std::string("/flag/ml"), sm).dir == "/sm/model");
  CHECK(ResolveModelDir(std::string("/m"), std::string("/flag/ml"), sm).dir == "/m");
  CHECK(ResolveModelDir(std::string(""), std::nullopt, {{"SM_MODEL_DIR", ""}}).dir ==
        "/opt/ml/model");
}

TEST_CASE("env map: snapshot of environ and lookups", "[env]") {
  setenv("MRCNN_COMMON_TEST_VAR", "a=b", 1);
  const auto env = CurrentEnvironment();
  CHECK(Lookup(env, "MRCNN_COMMON_TEST_VAR") == std::optional<std::string>("a=b"));
  CHECK_FALSE(Lookup(env, "MRCNN_COMMON_TEST_UNSET").has_value());
  CHECK(Lookup({{"E", ""}}, "E") == std::optional<std::string>(""));
  unsetenv("MRCNN_COMMON_TEST_VAR");
}

TEST_CASE("inputdataconfig: channels with their modes, sorted by name", "[inputdataconfig]") {
  JobTree tree;
  const auto file = tree.WriteConfig("inputdataconfig.json", R"({
    "val": {"TrainingInputMode": "Pipe", "S3DistributionType": "ShardedByS3Key", "RecordWrapperType": "RecordIO"},
    "train": {"ContentType": "application/json", "TrainingInputMode": "File",
              "S3DistributionType": "FullyReplicated", "RecordWrapperType": "None"},
    "anno": {"TrainingInputMode": "FastFile"},
    "extra": {}})");
  const auto channels = ParseInputDataConfig(file, tree.base() / "input" / "data");
  REQUIRE(channels.size() == 4);
  CHECK(channels[0].name == "anno");
  CHECK(channels[0].mode == InputMode::kFastFile);
  CHECK(channels[1].name == "extra");
  CHECK(channels[1].mode == InputMode::kFile);
  CHECK(channels[2].name == "train");
  CHECK(channels[2].dir == tree.base() / "input" / "data" / "train");
  CHECK(channels[2].mode == InputMode::kFile);
  CHECK(channels[2].content_type == "application/json");
  CHECK(channels[2].s3_distribution_type == "FullyReplicated");
  CHECK(channels[2].record_wrapper_type == "None");
  CHECK(channels[3].name == "val");
  CHECK(channels[3].mode == InputMode::kPipe);
  CHECK(channels[3].s3_distribution_type == "ShardedByS3Key");
  CHECK(channels[3].record_wrapper_type == "RecordIO");
}

TEST_CASE("inputdataconfig: absent file means the subdirectories of input/data",
          "[inputdataconfig]") {
  JobTree tree;
  const auto data = tree.base() / "input" / "data";
  CHECK(ParseInputDataConfig(tree.config("inputdataconfig.json"), data)
            .empty());  // no input/data at all
  tree.MakeDir("input/data/val");
  tree.MakeDir("input/data/train");
  JobTree::Write(data / "stray-file", "x");
  const auto channels = ParseInputDataConfig(tree.config("inputdataconfig.json"), data);
  REQUIRE(channels.size() == 2);
  CHECK(channels[0].name == "train");
  CHECK(channels[0].dir == data / "train");
  CHECK(channels[0].mode == InputMode::kFile);
  CHECK(channels[1].name == "val");
}

TEST_CASE("inputdataconfig: bad files name the channel and the field", "[inputdataconfig]") {
  JobTree tree;
  const auto data = tree.base() / "input" / "data";
  auto fails_with = [&](const std::string& text, const std::string& field,
                        const std::string& words) {
    const auto file = tree.WriteConfig("inputdataconfig.json", text);
    try {
      ParseInputDataConfig(file, data);
      FAIL("no ConfigError for " << text);
    } catch (const ConfigError& e) {
      CHECK(e.field() == field);
      CHECK_THAT(e.what(), Catch::Contains("inputdataconfig.json") && Catch::Contains(words));
    }
  };
  SECTION("unknown mode") {
    fails_with(R"({"train":{"TrainingInputMode":"Stream"}})", "train.TrainingInputMode",
               R"(must be "File", "FastFile" or "Pipe", got "Stream")");
  }
  SECTION("mode wrong type") {
    fails_with(R"({"train":{"TrainingInputMode":1}})", "train.TrainingInputMode",
               "must be a string");
  }
  SECTION("channel not an object") {
    fails_with(R"({"train":"File"})", "train", "must be an object");
  }
  SECTION("path-escaping channel name") {
    fails_with(R"({"..":{}})", "..", "not a valid channel name");
  }
  SECTION("slash in channel name") {
    fails_with(R"({"a/b":{}})", "a/b", "not a valid channel name");
  }
  SECTION("malformed") {
    fails_with(R"({"train":{)", "", "not valid JSON");
  }
  SECTION("not an object") {
    fails_with(R"([])", "", "JSON object");
  }
}

TEST_CASE("checkpointconfig: present, partial, absent and bad", "[checkpointconfig]") {
  JobTree tree;
  const auto paths = MakeJobPaths(tree.base());
  const auto file = tree.config("checkpointconfig.json");
  SECTION("absent") {
    const auto cfg = ParseCheckpointConfig(file, paths);
    CHECK_FALSE(cfg.configured);
    CHECK(cfg.local_path == paths.checkpoints);
    CHECK(cfg.s3_uri.empty());
  }
  SECTION("both fields") {
    tree.WriteConfig("checkpointconfig.json",
                     R"({"LocalPath":"/ckpt","S3Uri":"s3://bucket/ckpt"})");
    const auto cfg = ParseCheckpointConfig(file, paths);
    CHECK(cfg.configured);
    CHECK(cfg.local_path == "/ckpt");
    CHECK(cfg.s3_uri == "s3://bucket/ckpt");
  }
  SECTION("S3Uri only keeps the default local path") {
    tree.WriteConfig("checkpointconfig.json", R"({"S3Uri":"s3://bucket/ckpt"})");
    const auto cfg = ParseCheckpointConfig(file, paths);
    CHECK(cfg.configured);
    CHECK(cfg.local_path == paths.checkpoints);
  }
  SECTION("wrong type") {
    tree.WriteConfig("checkpointconfig.json", R"({"LocalPath":5})");
    REQUIRE_THROWS_WITH(ParseCheckpointConfig(file, paths),
                        Catch::Contains("checkpointconfig.json") &&
                            Catch::Contains("\"LocalPath\" must be a string"));
  }
  SECTION("malformed") {
    tree.WriteConfig("checkpointconfig.json", R"({"LocalPath":)");
    REQUIRE_THROWS_AS(ParseCheckpointConfig(file, paths), ConfigError);
  }
}

TEST_CASE("GPU count from the visible-devices variables, else device files", "[gpus]") {
  JobTree tree;
  const auto dev = tree.base() / "dev";
  for (const char* name :
       {"nvidia0", "nvidia1", "nvidia2", "nvidiactl", "nvidia-uvm", "nvidia-caps"}) {
    JobTree::Write(dev / name, "");
  }
  CHECK(CountGpus({}, dev) == 3);
  CHECK(CountGpus({}, tree.base() / "no-such-dev") == 0);
  CHECK(CountGpus({{"NVIDIA_VISIBLE_DEVICES", "all"}}, dev) == 3);
  CHECK(CountGpus({{"NVIDIA_VISIBLE_DEVICES", "none"}}, dev) == 0);
  CHECK(CountGpus({{"NVIDIA_VISIBLE_DEVICES", "void"}}, dev) == 0);
  CHECK(CountGpus({{"NVIDIA_VISIBLE_DEVICES", ""}}, dev) == 0);
  CHECK(CountGpus({{"NVIDIA_VISIBLE_DEVICES", "0,1"}}, dev) == 2);
  CHECK(CountGpus({{"CUDA_VISIBLE_DEVICES", "1"}, {"NVIDIA_VISIBLE_DEVICES", "all"}}, dev) == 1);
  CHECK(CountGpus({{"CUDA_VISIBLE_DEVICES", ""}}, dev) == 0);
  CHECK(CountGpus({{"CUDA_VISIBLE_DEVICES", "0,1,-1,2"}}, dev) ==
        2);  // CUDA stops at the first invalid entry
  CHECK(CountGpus({{"CUDA_VISIBLE_DEVICES", "GPU-8a1b,GPU-77ce"}}, dev) == 2);
  CHECK(CountGpus({{"CUDA_VISIBLE_DEVICES", "all"}}, dev) == 3);
}

TEST_CASE("job environment: a full SageMaker tree", "[job]") {
  JobTree tree;
  tree.WriteConfig("hyperparameters.json",
                   R"({"epochs":"3","sagemaker_container_log_level":"10"})");
  tree.WriteConfig("resourceconfig.json",
                   R"({"current_host":"algo-1","hosts":["algo-1","algo-2"]})");
  tree.WriteConfig("inputdataconfig.json", R"({"train":{"TrainingInputMode":"File"}})");
  tree.WriteConfig("checkpointconfig.json", R"({"LocalPath":"/ckpt"})");
  const auto job = LoadJobEnvironment(
      tree.base(), {{"TRAINING_JOB_NAME", "job-1"}, {"NVIDIA_VISIBLE_DEVICES", "0,1"}});
  CHECK(job.paths.base == tree.base());
  CHECK(job.hyperparameters.user["epochs"] == 3);
  CHECK(job.resources.hosts.size() == 2);
  REQUIRE(job.channels.size() == 1);
  CHECK(job.channels[0].name == "train");
  CHECK(job.checkpoint.local_path == "/ckpt");
  CHECK(job.job_name == "job-1");
  CHECK(job.num_gpus == 2);
  CHECK(job.num_cpus >= 1);
  CHECK(job.log_level == "10");
  CHECK(job.input_data_config["train"]["TrainingInputMode"] == "File");
}

TEST_CASE("job environment: an empty local tree is one host with no inputs", "[job]") {
  JobTree tree;
  const auto job = LoadJobEnvironment(tree.base(), {{"CUDA_VISIBLE_DEVICES", ""}});
  CHECK_FALSE(job.resources.present);
  CHECK(job.channels.empty());
  CHECK(job.hyperparameters.user.empty());
  CHECK(job.log_level == "20");
  CHECK(job.num_gpus == 0);
}

TEST_CASE("job environment: SageMaker files required together with resourceconfig.json", "[job]") {
  JobTree tree;
  tree.WriteConfig("resourceconfig.json", R"({"current_host":"algo-1","hosts":["algo-1"]})");
  tree.WriteConfig("inputdataconfig.json", R"({})");
  REQUIRE_THROWS_WITH(LoadJobEnvironment(tree.base(), {}),
                      Catch::Contains("hyperparameters.json") && Catch::Contains("is missing"));
  tree.WriteConfig("hyperparameters.json", R"({})");
  CHECK_NOTHROW(LoadJobEnvironment(tree.base(), {}));
  std::filesystem::remove(tree.config("inputdataconfig.json"));
  REQUIRE_THROWS_WITH(LoadJobEnvironment(tree.base(), {}), Catch::Contains("inputdataconfig.json"));
}
