#include "common/socket_interface.h"

#include <catch2/catch.hpp>
#include <set>

#include "job_tree.h"

using mrcnn::common::EnvMap;
using mrcnn::common::HostHasInterface;
using mrcnn::common::ParseResourceConfig;
using mrcnn::common::SocketInterfaceVariables;
using mrcnn::common::testing::JobTree;

namespace {

// A host that has exactly these interfaces, so the tests do not depend on the machine's.
auto HostWith(std::set<std::string> names) {
  return [names = std::move(names)](const std::string& name) { return names.contains(name); };
}

// SageMaker Python SDK v3's local mode writes this resourceconfig.json for every host.
constexpr const char* kSdkV3Local =
    R"({"current_host":"algo-1","hosts":["algo-1"],"network_interface_name":"ethwe",)"
    R"("current_instance_type":"local"})";

}  // namespace

TEST_CASE("socket interface: a named interface the host has goes to NCCL and Gloo",
          "[socket_interface]") {
  JobTree tree;
  const auto file = tree.WriteConfig(
      "resourceconfig.json",
      R"({"current_host":"algo-1","hosts":["algo-1","algo-2"],"network_interface_name":"eth0"})");
  const auto chosen =
      SocketInterfaceVariables(ParseResourceConfig(file), {}, file, HostWith({"lo", "eth0"}));
  CHECK(chosen.variables == EnvMap{{"GLOO_SOCKET_IFNAME", "eth0"}, {"NCCL_SOCKET_IFNAME", "eth0"}});
  CHECK_FALSE(chosen.note);
}

TEST_CASE(
    "socket interface: an interface the host lacks (SDK v3 local mode's ethwe) is ignored "
    "with one note",
    "[socket_interface]") {
  JobTree tree;
  const auto file = tree.WriteConfig("resourceconfig.json", kSdkV3Local);
  const auto chosen =
      SocketInterfaceVariables(ParseResourceConfig(file), {}, file, HostWith({"lo", "eth0"}));
  CHECK(chosen.variables.empty());
  REQUIRE(chosen.note);
  CHECK_THAT(*chosen.note,
             Catch::Contains(file.string()) &&
                 Catch::Contains("\"network_interface_name\" names \"ethwe\"") &&
                 Catch::Contains("does not have") && Catch::Contains("ignored") &&
                 Catch::Contains("NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME are not set"));
}

TEST_CASE("socket interface: variables the environment sets already are left alone",
          "[socket_interface]") {
  JobTree tree;
  const auto file = tree.WriteConfig("resourceconfig.json", kSdkV3Local);
  const auto rc = ParseResourceConfig(file);
  SECTION("one set: only the other is decided, and the note names only that one") {
    const auto chosen =
        SocketInterfaceVariables(rc, {{"NCCL_SOCKET_IFNAME", "ib0"}}, file, HostWith({}));
    CHECK(chosen.variables.empty());
    REQUIRE(chosen.note);
    CHECK_THAT(*chosen.note, Catch::Contains("ignored: GLOO_SOCKET_IFNAME is not set from it"));
    const auto present =
        SocketInterfaceVariables(rc, {{"NCCL_SOCKET_IFNAME", "ib0"}}, file, HostWith({"ethwe"}));
    CHECK(present.variables == EnvMap{{"GLOO_SOCKET_IFNAME", "ethwe"}});
  }
  SECTION("both set: nothing to decide, nothing to say") {
    const auto chosen = SocketInterfaceVariables(
        rc, {{"NCCL_SOCKET_IFNAME", "ib0"}, {"GLOO_SOCKET_IFNAME", ""}}, file, HostWith({}));
    CHECK(chosen.variables.empty());
    CHECK_FALSE(chosen.note);
  }
}

TEST_CASE("socket interface: nothing is exported unless resourceconfig.json names one",
          "[socket_interface]") {
  JobTree tree;
  const auto file = tree.config("resourceconfig.json");
  const auto everything = HostWith({"lo", "eth0", "ethwe"});
  SECTION("absent file (its eth0 default is a guess)") {
    const auto chosen = SocketInterfaceVariables(ParseResourceConfig(file), {}, file, everything);
    CHECK(chosen.variables.empty());
    CHECK_FALSE(chosen.note);
  }
  SECTION("no network_interface_name") {
    tree.WriteConfig("resourceconfig.json", R"({"current_host":"algo-1","hosts":["algo-1"]})");
    const auto chosen = SocketInterfaceVariables(ParseResourceConfig(file), {}, file, everything);
    CHECK(chosen.variables.empty());
    CHECK_FALSE(chosen.note);
  }
  SECTION("an empty name") {
    tree.WriteConfig("resourceconfig.json",
                     R"({"current_host":"algo-1","hosts":["algo-1"],"network_interface_name":""})");
    const auto chosen = SocketInterfaceVariables(ParseResourceConfig(file), {}, file, everything);
    CHECK(chosen.variables.empty());
    CHECK_FALSE(chosen.note);
  }
}

TEST_CASE("socket interface: the host's own interfaces are looked up by name",
          "[socket_interface]") {
  CHECK(HostHasInterface("lo"));  // every network namespace has a loopback
  CHECK_FALSE(HostHasInterface(""));
  CHECK_FALSE(HostHasInterface("mrcnn-no-such"));
  CHECK_FALSE(HostHasInterface("a-name-longer-than-ifnamsiz"));
}
