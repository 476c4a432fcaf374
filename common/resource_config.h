#pragma once
// input/config/resourceconfig.json (docs/contract.md, "Files").
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace mrcnn::common {

struct InstanceGroup {
  std::string name;
  std::string instance_type;
  std::vector<std::string> hosts;
};

struct ResourceConfig {
  bool present = false;  // false when the file is absent (local runs)
  std::string current_host;
  std::string current_instance_type;
  std::string current_group_name;
  std::string network_interface_name;
  std::vector<std::string> hosts;  // as written (the toolkit's order); node rank = index
  std::vector<InstanceGroup> instance_groups;
  // The file as read; when absent {"current_host":"algo-1","hosts":["algo-1"]},
  // which is what SM_RESOURCE_CONFIG then shows.
  nlohmann::json raw = nlohmann::json::object();
};

// Absent file = one host: present=false, current_host "algo-1", hosts {"algo-1"}.
// Absent optional fields take the public toolkit's defaults: instance type
// "local", group "homogeneousCluster", network interface "eth0".
// ConfigError on malformed JSON, wrong types, empty or duplicate hosts, and a
// current_host missing from hosts.
ResourceConfig ParseResourceConfig(const std::filesystem::path& file);

}  // namespace mrcnn::common
