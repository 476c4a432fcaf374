#include "common/socket_interface.h"

#include <fmt/format.h>
#include <net/if.h>

#include <vector>

namespace mrcnn::common {

bool HostHasInterface(const std::string& name) {
  // if_nametoindex asks the kernel about this network namespace, which is the container's:
  // the interfaces NCCL and Gloo would look for.
  return !name.empty() && if_nametoindex(name.c_str()) != 0;
}

SocketInterface SocketInterfaceVariables(
    const ResourceConfig& resources, const EnvMap& env, const std::filesystem::path& file,
    const std::function<bool(const std::string&)>& has_interface) {
  SocketInterface result;
  if (!resources.present || !resources.raw.contains("network_interface_name"))
    return result;
  const std::string& name = resources.network_interface_name;
  if (name.empty())
    return result;
  std::vector<std::string> unset;
  for (const char* variable : {"NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"}) {
    if (!Lookup(env, variable))
      unset.emplace_back(variable);
  }
  if (unset.empty())
    return result;
  if (!has_interface(name)) {
    const std::string variables = unset.size() == 2
                                      ? fmt::format("{} and {} are", unset[0], unset[1])
                                      : fmt::format("{} is", unset[0]);
    result.note = fmt::format(
        "{}: \"network_interface_name\" names \"{}\", which this host does not have; ignored: "
        "{} not set from it, so NCCL and Gloo choose an interface themselves (the SageMaker "
        "Python SDK v3's local mode writes \"ethwe\"; set NCCL_SOCKET_IFNAME/GLOO_SOCKET_IFNAME "
        "to choose one)",
        file.string(), name, variables);
    return result;
  }
  for (const std::string& variable : unset)
    result.variables[variable] = name;
  return result;
}

}  // namespace mrcnn::common
