#pragma once
#include <filesystem>
#include <string>

namespace mrcnn::data {

// Reads a file into memory; `what` names it in the error ("the COCO annotation file").
std::string ReadWholeFile(const std::filesystem::path& path, const char* what);

}  // namespace mrcnn::data
