#include "common/resource_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "common/config_error.h"
#include "common/json_file.h"

namespace mrcnn::common {
namespace {

std::vector<std::string> HostList(const nlohmann::json& obj, const std::string& key,
                                  const std::filesystem::path& file, const std::string& field) {
  const auto it = obj.find(key);
  if (it == obj.end())
    throw ConfigError(file.string(), field, "is missing; expected a list of host names");
  if (!it->is_array()) {
    throw ConfigError(file.string(), field,
                      "must be a list of host names, got " + JsonTypeName(*it));
  }
  if (it->empty())
    throw ConfigError(file.string(), field, "is empty; expected at least one host name");
  std::vector<std::string> hosts;
  std::set<std::string> seen;
  for (size_t i = 0; i < it->size(); ++i) {
    const auto& host = (*it)[i];
    const std::string item_field = fmt::format("{}[{}]", field, i);
    if (!host.is_string() || host.get_ref<const std::string&>().empty()) {
      throw ConfigError(file.string(), item_field,
                        "must be a non-empty host name, got " + host.dump());
    }
    if (!seen.insert(host.get<std::string>()).second) {
      throw ConfigError(
          file.string(), item_field,
          "duplicates host \"" + host.get<std::string>() + "\"; every host must appear once");
    }
    hosts.push_back(host.get<std::string>());
  }
  return hosts;
}

}  // namespace

ResourceConfig ParseResourceConfig(const std::filesystem::path& file) {
  ResourceConfig rc;
  const auto doc = ReadJsonObjectFile(file);
  if (!doc) {
    rc.current_host = "algo-1";
    rc.hosts = {"algo-1"};
    rc.current_instance_type = "local";
    rc.current_group_name = "homogeneousCluster";
    rc.network_interface_name = "eth0";
    rc.raw = {{"current_host", rc.current_host}, {"hosts", rc.hosts}};
    return rc;
  }
  rc.present = true;
  rc.raw = *doc;
  const auto current = OptionalString(*doc, "current_host", file, "current_host");
  if (!current || current->empty()) {
    throw ConfigError(file.string(), "current_host",
                      "is missing; expected this container's host name, e.g. \"algo-1\"");
  }
  rc.current_host = *current;
  // Kept in the order written, as the public toolkit keeps it: node rank is the index
  // here and the first host is the master, so SageMaker's algo-1 leads even in jobs of
  // ten hosts or more, where sorting as strings would put algo-10 before algo-2.
  rc.hosts = HostList(*doc, "hosts", file, "hosts");
  if (std::find(rc.hosts.begin(), rc.hosts.end(), rc.current_host) == rc.hosts.end()) {
    throw ConfigError(file.string(), "current_host",
                      fmt::format("must be one of \"hosts\" {}, got \"{}\"",
                                  nlohmann::json(rc.hosts).dump(), rc.current_host));
  }
  // Defaults are the public toolkit's.
  rc.current_instance_type =
      OptionalString(*doc, "current_instance_type", file, "current_instance_type")
          .value_or("local");
  rc.current_group_name = OptionalString(*doc, "current_group_name", file, "current_group_name")
                              .value_or("homogeneousCluster");
  rc.network_interface_name =
      OptionalString(*doc, "network_interface_name", file, "network_interface_name")
          .value_or("eth0");

  if (const auto groups = doc->find("instance_groups"); groups != doc->end()) {
    if (!groups->is_array()) {
      throw ConfigError(file.string(), "instance_groups",
                        "must be a list of objects, got " + JsonTypeName(*groups));
    }
    for (size_t i = 0; i < groups->size(); ++i) {
      const auto& g = (*groups)[i];
      const std::string field = fmt::format("instance_groups[{}]", i);
      if (!g.is_object())
        throw ConfigError(file.string(), field, "must be an object, got " + JsonTypeName(g));
      InstanceGroup group;
      const auto name =
          OptionalString(g, "instance_group_name", file, field + ".instance_group_name");
      if (!name)
        throw ConfigError(file.string(), field + ".instance_group_name",
                          "is missing; expected a string");
      group.name = *name;
      group.instance_type =
          OptionalString(g, "instance_type", file, field + ".instance_type").value_or("");
      group.hosts = HostList(g, "hosts", file, field + ".hosts");
      for (const auto& host : group.hosts) {
        if (std::find(rc.hosts.begin(), rc.hosts.end(), host) == rc.hosts.end()) {
          throw ConfigError(file.string(), field + ".hosts",
                            fmt::format("names \"{}\", which is not in \"hosts\" {}", host,
                                        nlohmann::json(rc.hosts).dump()));
        }
      }
      rc.instance_groups.push_back(std::move(group));
    }
  }
  return rc;
}

}  // namespace mrcnn::common
