#include "serving/models/memory_limit.h"

#include <unistd.h>

#include <charconv>
#include <fstream>
#include <optional>

namespace mrcnn::serving {
namespace {

// The number in a cgroup file; nullopt for "max", a missing file or anything unparsable.
std::optional<uint64_t> ReadLimitFile(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::string text;
  if (!(in >> text) || text == "max")
    return std::nullopt;
  uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size())
    return std::nullopt;
  return value;
}

}  // namespace

MemoryLimit ReadMemoryLimit(const std::filesystem::path& cgroup_root) {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  const uint64_t physical = pages > 0 && page_size > 0
                                ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size)
                                : 0;
  // cgroup v1 says "no limit" with a huge number (LONG_MAX rounded to pages): anything at or
  // above the RAM is no limit at all.
  for (const auto& [file, source] : {std::pair{cgroup_root / "memory.max", "cgroup v2 memory.max"},
                                     std::pair{cgroup_root / "memory" / "memory.limit_in_bytes",
                                               "cgroup v1 memory.limit_in_bytes"}}) {
    if (const auto limit = ReadLimitFile(file);
        limit && *limit > 0 && (physical == 0 || *limit < physical))
      return {*limit, source};
  }
  return {physical, "physical memory"};
}

}  // namespace mrcnn::serving
