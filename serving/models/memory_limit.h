#pragma once
// How much memory this process may use: the container's limit where there is one (cgroup v2
// memory.max, else cgroup v1 memory.limit_in_bytes; `podman run --memory 6g`, a SageMaker
// instance's container, a serverless endpoint's memory size), else the machine's RAM. The
// multi-model endpoint's default budget is drawn from it. Torch-free.
#include <cstdint>
#include <filesystem>
#include <string>

namespace mrcnn::serving {

struct MemoryLimit {
  uint64_t bytes = 0;
  std::string source;  // "cgroup v2 memory.max", "cgroup v1 ...", "physical memory"
};

// `cgroup_root` is /sys/fs/cgroup except in tests. A limit file that says "max" or a value
// at or above the machine's RAM means no container limit.
MemoryLimit ReadMemoryLimit(const std::filesystem::path& cgroup_root = "/sys/fs/cgroup");

}  // namespace mrcnn::serving
