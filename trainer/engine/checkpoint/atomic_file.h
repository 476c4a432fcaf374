#pragma once
// Durable file replacement: write to a temporary file in the same directory, fsync it,
// rename it over the target, fsync the directory. A crash leaves either the old file or
// the new one, never a partial one (a stale "*.tmp" may remain and is ignored).
#include <filesystem>
#include <string_view>

namespace mrcnn::engine {

// Throws std::runtime_error naming the path and the failing call (with errno text).
void WriteFileAtomically(const std::filesystem::path& path, std::string_view bytes);

// Reads a whole file; throws naming the path.
std::string ReadWholeFile(const std::filesystem::path& path);

}  // namespace mrcnn::engine
