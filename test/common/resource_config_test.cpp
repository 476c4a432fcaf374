#include "common/resource_config.h"

#include <catch2/catch.hpp>

#include "common/config_error.h"
#include "job_tree.h"

using mrcnn::common::ConfigError;
using mrcnn::common::ParseResourceConfig;
using mrcnn::common::testing::JobTree;

TEST_CASE("resourceconfig: the documented example parses", "[resourceconfig]") {
  JobTree tree;
  const auto file = tree.WriteConfig("resourceconfig.json", R"({"current_host":"algo-2",
    "current_instance_type":"ml.p4d.24xlarge","current_group_name":"homogeneousCluster",
    "hosts":["algo-1","algo-2"],"instance_groups":[{"instance_group_name":"homogeneousCluster",
    "instance_type":"ml.p4d.24xlarge","hosts":["algo-2","algo-1"]}],"network_interface_name":"eth0"})");
  const auto rc = ParseResourceConfig(file);
  CHECK(rc.present);
  CHECK(rc.current_host == "algo-2");
  CHECK(rc.current_instance_type == "ml.p4d.24xlarge");
  CHECK(rc.current_group_name == "homogeneousCluster");
  CHECK(rc.network_interface_name == "eth0");
  CHECK(rc.hosts == std::vector<std::string>{"algo-1", "algo-2"});
  REQUIRE(rc.instance_groups.size() == 1);
  CHECK(rc.instance_groups[0].name == "homogeneousCluster");
  CHECK(rc.instance_groups[0].instance_type == "ml.p4d.24xlarge");
  CHECK(rc.instance_groups[0].hosts == std::vector<std::string>{"algo-2", "algo-1"});
  CHECK(rc.raw["hosts"] == nlohmann::json::array({"algo-1", "algo-2"}));
}

TEST_CASE("resourceconfig: hosts keep the order written, like the public toolkit",
          "[resourceconfig]") {
  JobTree tree;
  const auto file = tree.WriteConfig(
      "resourceconfig.json", R"({"current_host":"algo-10","hosts":["algo-2","algo-10","algo-1"]})");
  const auto rc = ParseResourceConfig(file);
  CHECK(rc.hosts == std::vector<std::string>{"algo-2", "algo-10", "algo-1"});
  // Optional fields take the public toolkit's defaults.
  CHECK(rc.current_instance_type == "local");
  CHECK(rc.current_group_name == "homogeneousCluster");
  CHECK(rc.network_interface_name == "eth0");
  CHECK(rc.instance_groups.empty());
}

TEST_CASE("resourceconfig: absent file is one host algo-1", "[resourceconfig]") {
  JobTree tree;
  const auto rc = ParseResourceConfig(tree.config("resourceconfig.json"));
  CHECK_FALSE(rc.present);
  CHECK(rc.current_host == "algo-1");
  CHECK(rc.hosts == std::vector<std::string>{"algo-1"});
}

TEST_CASE("resourceconfig: bad files name the file, the field and what was expected",
          "[resourceconfig]") {
  JobTree tree;
  auto fails_with = [&](const std::string& text, const std::string& field,
                        const std::string& words) {
    const auto file = tree.WriteConfig("resourceconfig.json", text);
    try {
      ParseResourceConfig(file);
      FAIL("no ConfigError for " << text);
    } catch (const ConfigError& e) {
      CHECK(e.file() == file.string());
      CHECK(e.field() == field);
      CHECK_THAT(e.what(), Catch::Contains("resourceconfig.json") && Catch::Contains(words));
    }
  };
  SECTION("current_host not in hosts") {
    fails_with(R"({"current_host":"algo-3","hosts":["algo-2","algo-1"]})", "current_host",
               R"("current_host" must be one of "hosts" ["algo-2","algo-1"], got "algo-3")");
  }
  SECTION("current_host missing") {
    fails_with(R"({"hosts":["algo-1"]})", "current_host", "is missing");
  }
  SECTION("current_host wrong type") {
    fails_with(R"({"current_host":1,"hosts":["algo-1"]})", "current_host",
               "must be a string, got a number");
  }
  SECTION("duplicate hosts") {
    fails_with(R"({"current_host":"algo-1","hosts":["algo-1","algo-2","algo-1"]})", "hosts[2]",
               R"("hosts[2]" duplicates host "algo-1"; every host must appear once)");
  }
  SECTION("duplicate hosts in an instance group") {
    fails_with(
        R"({"current_host":"algo-1","hosts":["algo-1","algo-2"],"instance_groups":[
               {"instance_group_name":"g","hosts":["algo-2","algo-2"]}]})",
        "instance_groups[0].hosts[1]", "duplicates host \"algo-2\"");
  }
  SECTION("empty hosts") {
    fails_with(R"({"current_host":"algo-1","hosts":[]})", "hosts", "is empty");
  }
  SECTION("hosts missing") {
    fails_with(R"({"current_host":"algo-1"})", "hosts", "is missing");
  }
  SECTION("hosts wrong type") {
    fails_with(R"({"current_host":"algo-1","hosts":"algo-1"})", "hosts",
               "must be a list of host names, got a string");
  }
  SECTION("host entry wrong type") {
    fails_with(R"({"current_host":"algo-1","hosts":["algo-1",2]})", "hosts[1]",
               "non-empty host name");
  }
  SECTION("network_interface_name wrong type") {
    fails_with(R"({"current_host":"algo-1","hosts":["algo-1"],"network_interface_name":["eth0"]})",
               "network_interface_name", "must be a string, got an array");
  }
  SECTION("instance group names an unknown host") {
    fails_with(
        R"({"current_host":"algo-1","hosts":["algo-1"],"instance_groups":[{"instance_group_name":"g",
               "instance_type":"ml.m5.xlarge","hosts":["algo-9"]}]})",
        "instance_groups[0].hosts", "\"algo-9\", which is not in \"hosts\"");
  }
  SECTION("instance groups wrong type") {
    fails_with(R"({"current_host":"algo-1","hosts":["algo-1"],"instance_groups":{}})",
               "instance_groups", "must be a list of objects");
  }
  SECTION("malformed JSON") {
    fails_with(R"({"current_host": "algo-1", "hosts": [)", "", "not valid JSON");
  }
  SECTION("not an object") {
    fails_with(R"("algo-1")", "", "JSON object");
  }
}
