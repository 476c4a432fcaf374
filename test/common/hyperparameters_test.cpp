#include "common/hyperparameters.h"

#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "common/config_error.h"
#include "job_tree.h"

using mrcnn::common::ConfigError;
using mrcnn::common::ParseHyperparameters;
using mrcnn::common::testing::JobTree;
using nlohmann::json;

namespace {

// {"k0":"1","k1":"1",...} with n entries.
std::string ManyEntries(int n) {
  json doc = json::object();
  for (int i = 0; i < n; ++i)
    doc[fmt::format("k{}", i)] = "1";
  return doc.dump();
}

}  // namespace

TEST_CASE("hyperparameters: SDK-encoded values are decoded to their types", "[hyperparameters]") {
  JobTree tree;
  const auto file = tree.WriteConfig("hyperparameters.json", R"({
    "epochs": "10", "lr": "0.001", "flag": "true", "sizes": "[1,2]", "name": "\"resnet\"",
    "opts": "{\"a\":1}", "none": "null"})");
  const auto hps = ParseHyperparameters(file);
  CHECK(hps.user["epochs"] == json(10));
  CHECK(hps.user["epochs"].is_number_integer());
  CHECK(hps.user["lr"] == json(0.001));
  CHECK(hps.user["flag"] == json(true));
  CHECK(hps.user["sizes"] == json::array({1, 2}));
  CHECK(hps.user["name"] == json("resnet"));
  CHECK(hps.user["opts"] == json{{"a", 1}});
  CHECK(hps.user["none"].is_null());
  CHECK(hps.framework.empty());
}

TEST_CASE("hyperparameters: Python's NaN and Infinity constants decode to floats",
          "[hyperparameters]") {
  JobTree tree;
  const auto file = tree.WriteConfig("hyperparameters.json",
                                     R"({"a": "NaN", "b": "Infinity", "c": "-Infinity"})");
  const auto hps = ParseHyperparameters(file);
  CHECK(std::isnan(hps.user["a"].get<double>()));
  CHECK(hps.user["b"].get<double>() == std::numeric_limits<double>::infinity());
  CHECK(hps.UserArgv() == std::vector<std::string>{"-a", "nan", "-b", "inf", "-c", "-inf"});
}

TEST_CASE("hyperparameters: raw strings that are not JSON are kept as written",
          "[hyperparameters]") {
  JobTree tree;
  const auto file =
      tree.WriteConfig("hyperparameters.json",
                       R"({"optimizer": "adam", "path": "s3://b/k", "half": "[1,", "empty": ""})");
  const auto hps = ParseHyperparameters(file);
  CHECK(hps.user["optimizer"] == json("adam"));
  CHECK(hps.user["path"] == json("s3://b/k"));
  CHECK(hps.user["half"] == json("[1,"));
  CHECK(hps.user["empty"] == json(""));
}

TEST_CASE("hyperparameters: non-string JSON values from raw-API users are accepted as typed",
          "[hyperparameters]") {
  JobTree tree;
  const auto file =
      tree.WriteConfig("hyperparameters.json", R"({"epochs": 3, "flag": false, "l": [1, "a"]})");
  const auto hps = ParseHyperparameters(file);
  CHECK(hps.user["epochs"] == json(3));
  CHECK(hps.user["flag"] == json(false));
  CHECK(hps.user["l"] == json::array({1, "a"}));
}

TEST_CASE("hyperparameters: sagemaker_* and _tuning_objective_metric are the framework's",
          "[hyperparameters]") {
  JobTree tree;
  const auto file = tree.WriteConfig("hyperparameters.json", R"({
    "sagemaker_program": "\"train.py\"", "sagemaker_mpi_enabled": "true",
    "sagemaker_mpi_num_of_processes_per_host": "4", "_tuning_objective_metric": "\"loss\"",
    "epochs": "2", "not_sagemaker_x": "1"})");
  const auto hps = ParseHyperparameters(file);
  CHECK(hps.framework == json{{"sagemaker_program", "train.py"},
                              {"sagemaker_mpi_enabled", true},
                              {"sagemaker_mpi_num_of_processes_per_host", 4},
                              {"_tuning_objective_metric", "loss"}});
  CHECK(hps.user == json{{"epochs", 2}, {"not_sagemaker_x", 1}});
}

TEST_CASE("hyperparameters: absent file means none", "[hyperparameters]") {
  JobTree tree;
  const auto hps = ParseHyperparameters(tree.config("hyperparameters.json"));
  CHECK(hps.user.empty());
  CHECK(hps.framework.empty());
  CHECK(hps.UserArgv().empty());
}

TEST_CASE("hyperparameters: bad files name the file and the problem", "[hyperparameters]") {
  JobTree tree;
  SECTION("malformed JSON") {
    const auto file = tree.WriteConfig("hyperparameters.json", R"({"epochs": "10",)");
    REQUIRE_THROWS_AS(ParseHyperparameters(file), ConfigError);
    REQUIRE_THROWS_WITH(ParseHyperparameters(file), Catch::Contains("hyperparameters.json") &&
                                                        Catch::Contains("not valid JSON"));
  }
  SECTION("a number too large for a double (nlohmann's out_of_range, found by fuzzing)") {
    const auto file = tree.WriteConfig("hyperparameters.json", R"({"lr": 1e400})");
    REQUIRE_THROWS_AS(ParseHyperparameters(file), ConfigError);
    REQUIRE_THROWS_WITH(ParseHyperparameters(file), Catch::Contains("hyperparameters.json") &&
                                                        Catch::Contains("not valid JSON"));
  }
  SECTION("top level is not an object") {
    const auto file = tree.WriteConfig("hyperparameters.json", R"(["epochs", "10"])");
    REQUIRE_THROWS_WITH(ParseHyperparameters(file), Catch::Contains("hyperparameters.json") &&
                                                        Catch::Contains("JSON object") &&
                                                        Catch::Contains("an array"));
  }
  SECTION("more than 100 entries") {
    const auto file = tree.WriteConfig("hyperparameters.json", ManyEntries(101));
    REQUIRE_THROWS_WITH(ParseHyperparameters(file),
                        Catch::Contains("101 entries") && Catch::Contains("at most 100"));
  }
  SECTION("exactly 100 entries is fine") {
    const auto file = tree.WriteConfig("hyperparameters.json", ManyEntries(100));
    CHECK(ParseHyperparameters(file).user.size() == 100);
  }
  SECTION("empty key") {
    const auto file = tree.WriteConfig("hyperparameters.json", R"({"": "1"})");
    REQUIRE_THROWS_AS(ParseHyperparameters(file), ConfigError);
  }
}

TEST_CASE("hyperparameters: argv is sorted --key value pairs the way the toolkit renders them",
          "[hyperparameters]") {
  JobTree tree;
  const auto file = tree.WriteConfig("hyperparameters.json", R"({
    "lr": "0.001", "epochs": "10", "flag": "true", "off": "false", "sizes": "[1,2]", "optimizer": "adam",
    "x": "5", "opts": "{\"b\":\"y\",\"a\":1}", "name": "\"resnet\"", "tiny": "1e-05", "big": "1e16",
    "words": "[\"a\",\"it's\"]", "none": "null", "sagemaker_program": "\"train.py\""})");
  const auto argv = ParseHyperparameters(file).UserArgv();
  const std::vector<std::string> expected = {
      "--big",       "1e+16",   "--epochs",        "10",      "--flag",  "True",   "--lr",
      "0.001",       "--name",  "resnet",          "--none",  "",        "--off",  "False",
      "--optimizer", "adam",    "--opts",          "a=1,b=y", "--sizes", "[1, 2]", "--tiny",
      "1e-05",       "--words", "['a', \"it's\"]", "-x",      "5"};
  CHECK(argv == expected);
}

// SageMaker Python SDK v3 (ModelTrainer) writes each value through safe_serialize: strings as
// they are, anything else json.dumps'd with Python's default separators. v2's framework
// estimators json.dumps every value, strings included. Both must reach the program alike.
TEST_CASE("hyperparameters: SDK v3's strings decode to what v2's JSON encoding gives",
          "[hyperparameters]") {
  JobTree v2_tree;
  JobTree v3_tree;
  const auto v2 = ParseHyperparameters(v2_tree.WriteConfig("hyperparameters.json", R"({
    "config-file": "\"COCO-InstanceSegmentation/mask_rcnn_R_50_FPN_3x.yaml\"",
    "local-config-file": "\"my_config.yaml\"",
    "opts": "[\"SOLVER.MAX_ITER\", \"100\", \"SOLVER.STEPS\", \"[60, 80]\"]",
    "resume": "true", "eval-only": "false", "lr": "0.02", "sizes": "[1, 2]", "dict": "{\"a\": 1}",
    "none": "null", "sagemaker_program": "\"train.py\"",
    "sagemaker_submit_directory": "\"/opt/ml/code\"",
    "sagemaker_mpi_num_of_processes_per_host": "2"})"));
  const auto v3 = ParseHyperparameters(v3_tree.WriteConfig("hyperparameters.json", R"({
    "config-file": "COCO-InstanceSegmentation/mask_rcnn_R_50_FPN_3x.yaml",
    "local-config-file": "my_config.yaml",
    "opts": "[\"SOLVER.MAX_ITER\", \"100\", \"SOLVER.STEPS\", \"[60, 80]\"]",
    "resume": "true", "eval-only": "false", "lr": "0.02", "sizes": "[1, 2]", "dict": "{\"a\": 1}",
    "none": "null", "sagemaker_program": "train.py",
    "sagemaker_submit_directory": "/opt/ml/code",
    "sagemaker_mpi_num_of_processes_per_host": "2"})"));
  CHECK(v3.user == v2.user);
  CHECK(v3.framework == v2.framework);
  CHECK(v3.user["opts"] == json::array({"SOLVER.MAX_ITER", "100", "SOLVER.STEPS", "[60, 80]"}));
  CHECK(v3.user["resume"] == json(true));
  CHECK(v3.framework["sagemaker_program"] == json("train.py"));
  CHECK(v3.framework["sagemaker_mpi_num_of_processes_per_host"] == json(2));
  // The list reaches the trainer as Python's str() of it, which its --opts reads as a list.
  const std::vector<std::string> expected = {
      "--config-file",
      "COCO-InstanceSegmentation/mask_rcnn_R_50_FPN_3x.yaml",
      "--dict",
      "a=1",
      "--eval-only",
      "False",
      "--local-config-file",
      "my_config.yaml",
      "--lr",
      "0.02",
      "--none",
      "",
      "--opts",
      "['SOLVER.MAX_ITER', '100', 'SOLVER.STEPS', '[60, 80]']",
      "--resume",
      "True",
      "--sizes",
      "[1, 2]"};
  CHECK(v3.UserArgv() == expected);
  CHECK(v2.UserArgv() == expected);
}

TEST_CASE("hyperparameters: opts as a space-separated string reaches the program unchanged",
          "[hyperparameters]") {
  JobTree tree;
  const std::string text = "SOLVER.MAX_ITER 100 MODEL.WEIGHTS ''";
  for (const json& written : {json(text), json(json(text).dump())}) {  // v3 raw, v2 encoded
    INFO(written.dump());
    const auto hps = ParseHyperparameters(
        tree.WriteConfig("hyperparameters.json", json{{"opts", written}}.dump()));
    CHECK(hps.user["opts"] == json(text));
    CHECK(hps.UserArgv() == std::vector<std::string>{"--opts", text});
  }
}

TEST_CASE("hyperparameters: booleans in every form the SDKs write give True/False on argv",
          "[hyperparameters]") {
  JobTree tree;
  // "true"/"false": json.dumps (v2 frameworks, v3 safe_serialize); "True"/"False": str() (v2's
  // generic Estimator, v3's tuner) or typed by hand; JSON booleans: raw-API users.
  const std::vector<std::pair<json, std::string>> forms = {{"true", "True"}, {"false", "False"},
                                                           {"True", "True"}, {"False", "False"},
                                                           {true, "True"},   {false, "False"}};
  for (const auto& [written, argv] : forms) {
    INFO(written.dump());
    const auto hps = ParseHyperparameters(tree.WriteConfig(
        "hyperparameters.json", json{{"resume", written}, {"eval-only", written}}.dump()));
    CHECK(hps.UserArgv() == std::vector<std::string>{"--eval-only", argv, "--resume", argv});
  }
}
