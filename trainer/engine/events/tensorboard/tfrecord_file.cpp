#include "trainer/engine/events/tensorboard/tfrecord_file.h"

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

#include "trainer/engine/events/tensorboard/crc32c.h"

namespace mrcnn::engine {
namespace {

void PutLittleEndian(unsigned char* out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i)
    out[i] = static_cast<unsigned char>(value >> (8 * i));
}

}  // namespace

TfRecordFile::TfRecordFile(const std::filesystem::path& path) : path_(path) {
  file_ = std::fopen(path_.c_str(), "ab");
  if (file_ == nullptr)
    throw std::runtime_error(path_.string() +
                             ": cannot open for appending: " + std::strerror(errno));
}

TfRecordFile::~TfRecordFile() {
  if (file_ != nullptr)
    std::fclose(file_);
}

void TfRecordFile::Append(std::string_view record) {
  unsigned char header[12];
  PutLittleEndian(header, record.size(), 8);
  PutLittleEndian(header + 8, MaskedCrc32c(header, 8), 4);
  unsigned char footer[4];
  PutLittleEndian(footer, MaskedCrc32c(record.data(), record.size()), 4);
  if (std::fwrite(header, 1, sizeof header, file_) != sizeof header ||
      std::fwrite(record.data(), 1, record.size(), file_) != record.size() ||
      std::fwrite(footer, 1, sizeof footer, file_) != sizeof footer) {
    throw std::runtime_error(path_.string() + ": write failed: " + std::strerror(errno));
  }
}

void TfRecordFile::Flush() {
  if (std::fflush(file_) != 0)
    throw std::runtime_error(path_.string() + ": flush failed: " + std::strerror(errno));
}

}  // namespace mrcnn::engine
