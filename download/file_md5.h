#pragma once
// The md5 of a file, read in 1 MiB pieces (zoo files are hundreds of MB).
#include <filesystem>
#include <string>

namespace mrcnn::download {

// Lower-case hex. Throws std::runtime_error naming the file when it cannot be read.
std::string Md5HexOfFile(const std::filesystem::path& file);

}  // namespace mrcnn::download
