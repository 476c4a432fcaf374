#pragma once
// Appends TFRecord-framed records to a file: uint64 length (little endian), masked
// CRC-32C of the length, the bytes, masked CRC-32C of the bytes. Flush() hands what was
// written to the operating system, so a process killed afterwards leaves whole records
// (a reader stops at a torn last record). Torch-free.
#include <cstdio>
#include <filesystem>
#include <string_view>

namespace mrcnn::engine {

class TfRecordFile {
 public:
  // Creates or appends; throws std::runtime_error naming the file.
  explicit TfRecordFile(const std::filesystem::path& path);
  ~TfRecordFile();
  TfRecordFile(const TfRecordFile&) = delete;
  TfRecordFile& operator=(const TfRecordFile&) = delete;

  void Append(std::string_view record);
  void Flush();
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  std::FILE* file_ = nullptr;
};

}  // namespace mrcnn::engine
