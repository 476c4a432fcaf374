#pragma once
// NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME from resourceconfig.json's
// "network_interface_name" (docs/contract.md, "Files").
//
// SageMaker names the interface its hosts reach each other on ("eth0"), and the public
// toolkit hands it to NCCL. The local mode of the SageMaker Python SDK v3 writes "ethwe",
// which a local container does not have: NCCL and Gloo told to use an interface that does
// not exist fail at their first collective instead of choosing one, so a name this host
// lacks is not exported (and one log line says so).
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "common/env_map.h"
#include "common/resource_config.h"

namespace mrcnn::common {

struct SocketInterface {
  EnvMap variables;                 // for every child's environment; empty: nothing to add
  std::optional<std::string> note;  // one log line when the named interface was ignored
};

// Whether this process's network namespace has an interface of that name (if_nametoindex).
bool HostHasInterface(const std::string& name);

// Nothing when resourceconfig.json is absent or names no interface (its "eth0" default is
// the toolkit's guess, not the platform's word), and nothing for a variable `env` already
// sets (the user's or launcher's choice wins). Otherwise NCCL_SOCKET_IFNAME and
// GLOO_SOCKET_IFNAME get the name when `has_interface` says the host has it; when it does
// not, neither is set and `note` names `file`, the interface and why it was ignored.
SocketInterface SocketInterfaceVariables(
    const ResourceConfig& resources, const EnvMap& env, const std::filesystem::path& file,
    const std::function<bool(const std::string&)>& has_interface = HostHasInterface);

}  // namespace mrcnn::common
