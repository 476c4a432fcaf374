#include "common/training_env.h"

#include <catch2/catch.hpp>

#include "job_tree.h"

using namespace mrcnn::common;
using mrcnn::common::testing::JobTree;
using nlohmann::json;

namespace {

struct SageMakerJob {
  JobTree tree;
  JobEnvironment job;
  World world;
  EnvMap vars;

  explicit SageMakerJob(const std::string& entry_point = "train.py") {
    tree.WriteConfig("hyperparameters.json", R"({
      "sagemaker_program": "\"train.py\"", "sagemaker_submit_directory": "\"s3://b/src.tar.gz\"",
      "sagemaker_container_log_level": "20", "sagemaker_mpi_enabled": "true",
      "sagemaker_region": "\"us-west-2\"", "_tuning_objective_metric": "\"loss\"",
      "epochs": "10", "lr": "0.001", "use-amp": "true", "sizes": "[1,2]", "optimizer": "adam", "x": "5"})");
    tree.WriteConfig("resourceconfig.json",
                     R"({"current_host":"algo-2","current_instance_type":"ml.p4d.24xlarge",
      "current_group_name":"homogeneousCluster","hosts":["algo-1","algo-2"],"instance_groups":[
      {"instance_group_name":"homogeneousCluster","instance_type":"ml.p4d.24xlarge","hosts":["algo-2","algo-1"]}],
      "network_interface_name":"eth0"})");
    tree.WriteConfig(
        "inputdataconfig.json",
        R"({"train":{"TrainingInputMode":"File"},"val":{"TrainingInputMode":"File"}})");
    job = LoadJobEnvironment(tree.base(),
                             {{"TRAINING_JOB_NAME", "job-1"}, {"CUDA_VISIBLE_DEVICES", "0,1"}});
    world = ResolveWorld(job, {}, {});
    vars = TrainingEnvironmentVariables(job, world, entry_point);
  }
  std::string Var(const std::string& key) const {
    const auto it = vars.find(key);
    if (it == vars.end())
      throw std::runtime_error(key + " is not set");
    return it->second;
  }
};

}  // namespace

TEST_CASE("SM_*: hosts, current host and instance facts", "[training_env]") {
  const SageMakerJob j;
  CHECK(j.Var("SM_HOSTS") == R"(["algo-1","algo-2"])");
  CHECK(j.Var("SM_CURRENT_HOST") == "algo-2");
  CHECK(j.Var("SM_CURRENT_INSTANCE_TYPE") == "ml.p4d.24xlarge");
  CHECK(j.Var("SM_CURRENT_INSTANCE_GROUP") == "homogeneousCluster");
  CHECK(j.Var("SM_CURRENT_INSTANCE_GROUP_HOSTS") == R"(["algo-2","algo-1"])");
  CHECK(j.Var("SM_INSTANCE_GROUPS") == R"(["homogeneousCluster"])");
  CHECK(j.Var("SM_DISTRIBUTION_INSTANCE_GROUPS") == R"(["homogeneousCluster"])");
  CHECK(j.Var("SM_IS_HETERO") == "false");
  CHECK(j.Var("SM_NETWORK_INTERFACE_NAME") == "eth0");
  CHECK(j.Var("SM_NUM_GPUS") == "2");
  CHECK(j.Var("SM_NUM_NEURONS") == "0");
  CHECK(std::stoi(j.Var("SM_NUM_CPUS")) >= 1);
  CHECK(j.Var("SM_LOG_LEVEL") == "20");
}

TEST_CASE("SM_*: hyperparameters typed, per key, and as argv", "[training_env]") {
  const SageMakerJob j;
  CHECK(j.Var("SM_HPS") ==
        R"({"epochs":10,"lr":0.001,"optimizer":"adam","sizes":[1,2],"use-amp":true,"x":5})");
  CHECK(j.Var("SM_HP_EPOCHS") == "10");
  CHECK(j.Var("SM_HP_LR") == "0.001");
  CHECK(j.Var("SM_HP_USE-AMP") == "true");  // upper-cased, hyphen kept
  CHECK(j.Var("SM_HP_SIZES") == "[1,2]");
  CHECK(j.Var("SM_HP_OPTIMIZER") == "adam");
  CHECK(j.vars.count("SM_HP_SAGEMAKER_PROGRAM") == 0);
  CHECK(j.vars.count("SM_HP__TUNING_OBJECTIVE_METRIC") == 0);
  CHECK(
      j.Var("SM_USER_ARGS") ==
      R"(["--epochs","10","--lr","0.001","--optimizer","adam","--sizes","[1, 2]","--use-amp","True","-x","5"])");
  // Only the non-toolkit sagemaker_* keys are framework params.
  CHECK(j.Var("SM_FRAMEWORK_PARAMS") == R"({"sagemaker_mpi_enabled":true})");
}

TEST_CASE("SM_*: channels and directories", "[training_env]") {
  const SageMakerJob j;
  const std::string base = j.tree.base().string();
  CHECK(j.Var("SM_CHANNELS") == R"(["train","val"])");
  CHECK(j.Var("SM_CHANNEL_TRAIN") == base + "/input/data/train");
  CHECK(j.Var("SM_CHANNEL_VAL") == base + "/input/data/val");
  CHECK(j.Var("SM_MODEL_DIR") == base + "/model");
  CHECK(j.Var("SM_OUTPUT_DIR") == base + "/output");
  CHECK(j.Var("SM_OUTPUT_DATA_DIR") == base + "/output/data");
  CHECK(j.Var("SM_OUTPUT_INTERMEDIATE_DIR") == base + "/output/intermediate");
  CHECK(j.Var("SM_INPUT_DIR") == base + "/input");
  CHECK(j.Var("SM_INPUT_CONFIG_DIR") == base + "/input/config");
  CHECK(j.Var("SM_MODULE_DIR") == "s3://b/src.tar.gz");
  CHECK(json::parse(j.Var("SM_INPUT_DATA_CONFIG")) == j.job.input_data_config);
  CHECK(json::parse(j.Var("SM_RESOURCE_CONFIG")) == j.job.resources.raw);
}

TEST_CASE("SM_*: entry point and module name", "[training_env]") {
  const SageMakerJob user("train.py");
  CHECK(user.Var("SM_USER_ENTRY_POINT") == "train.py");
  CHECK(user.Var("SM_MODULE_NAME") == "train");
  const SageMakerJob trainer("");
  CHECK(trainer.Var("SM_USER_ENTRY_POINT").empty());
  CHECK(trainer.Var("SM_MODULE_NAME") == "None");  // the toolkit's str(None)
}

TEST_CASE("SM_TRAINING_ENV holds the whole environment as JSON", "[training_env]") {
  const SageMakerJob j;
  const auto env = json::parse(j.Var("SM_TRAINING_ENV"));
  CHECK(env["hosts"] == json::array({"algo-1", "algo-2"}));
  CHECK(env["current_host"] == "algo-2");
  CHECK(env["hyperparameters"]["epochs"] == 10);
  CHECK(env["additional_framework_parameters"] == json{{"sagemaker_mpi_enabled", true}});
  CHECK(env["channel_input_dirs"]["train"] == j.tree.base().string() + "/input/data/train");
  CHECK(env["job_name"] == "job-1");
  CHECK(env["num_gpus"] == 2);
  CHECK(env["log_level"] == 20);
  // Distribution is on, so the toolkit's master is the group's first host as written.
  CHECK(env["master_hostname"] == "algo-2");
  CHECK(env["is_master"] == true);
  CHECK(env["distribution_hosts"] == json::array({"algo-2", "algo-1"}));
  CHECK(env["user_entry_point"] == "train.py");
  CHECK(env["framework_module"].is_null());
  CHECK(env["is_modelparallel_enabled"].is_null());
  CHECK(env["topology"] == json::array());
  CHECK(env.size() == 37);
}

TEST_CASE("SM_*: a local tree without config files", "[training_env]") {
  JobTree tree;
  tree.MakeDir("input/data/train");
  const auto job = LoadJobEnvironment(tree.base(), {{"CUDA_VISIBLE_DEVICES", ""}});
  const auto vars = TrainingEnvironmentVariables(job, ResolveWorld(job, {}, {}), "");
  CHECK(vars.at("SM_HOSTS") == R"(["algo-1"])");
  CHECK(vars.at("SM_CURRENT_HOST") == "algo-1");
  CHECK(vars.at("SM_CHANNELS") == R"(["train"])");
  CHECK(vars.at("SM_CHANNEL_TRAIN") == (tree.base() / "input/data/train").string());
  CHECK(vars.at("SM_HPS") == "{}");
  CHECK(vars.at("SM_USER_ARGS") == "[]");
  CHECK(vars.at("SM_FRAMEWORK_PARAMS") == "{}");
  CHECK(vars.at("SM_NUM_GPUS") == "0");
  CHECK(vars.at("SM_DISTRIBUTION_INSTANCE_GROUPS") == "[]");
  CHECK(vars.at("SM_CURRENT_INSTANCE_TYPE") == "local");
}

TEST_CASE("12 hosts keep SageMaker's order: node rank n-1 for algo-n, master algo-1",
          "[training_env][world]") {
  json hosts = json::array();
  for (int n = 1; n <= 12; ++n)
    hosts.push_back("algo-" + std::to_string(n));
  for (const int n : {1, 2, 9, 10, 12}) {
    const std::string current = "algo-" + std::to_string(n);
    CAPTURE(current);
    JobTree tree;
    tree.WriteConfig("hyperparameters.json", "{}");
    tree.WriteConfig("inputdataconfig.json", "{}");
    tree.WriteConfig("resourceconfig.json",
                     json{{"current_host", current}, {"hosts", hosts}}.dump());
    const auto job = LoadJobEnvironment(tree.base(), {{"CUDA_VISIBLE_DEVICES", "0"}});
    const auto world = ResolveWorld(job, {}, {});
    CHECK(world.launcher == Launcher::kSageMaker);
    CHECK(world.node_rank == n - 1);
    CHECK(world.nnodes == 12);
    CHECK(world.master_addr == "algo-1");
    CHECK(json(world.hosts) == hosts);
    const auto vars = TrainingEnvironmentVariables(job, world, "");
    CHECK(vars.at("SM_HOSTS") == hosts.dump());
    const auto training_env = json::parse(vars.at("SM_TRAINING_ENV"));
    CHECK(training_env["hosts"] == hosts);
    CHECK(training_env["master_hostname"] == "algo-1");
    CHECK(training_env["is_master"] == (n == 1));
    const auto child = ProcessVariables(world, 0);
    CHECK(child.at("GROUP_RANK") == std::to_string(n - 1));
    CHECK(child.at("RANK") == std::to_string(n - 1));
    CHECK(child.at("MASTER_ADDR") == "algo-1");
  }
}
