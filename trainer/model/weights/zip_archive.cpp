#include "trainer/model/weights/zip_archive.h"

#include <stdexcept>
#include <string>
#include <utility>

namespace mrcnn::model::weights {
namespace {

constexpr uint32_t kLocalHeader = 0x04034b50;
constexpr uint32_t kCentralHeader = 0x02014b50;
constexpr uint32_t kEndOfDirectory = 0x06054b50;
constexpr uint32_t kZip64EndOfDirectory = 0x06064b50;
constexpr uint32_t kZip64Locator = 0x07064b50;
constexpr uint16_t kZip64ExtraId = 0x0001;
constexpr size_t kEndOfDirectorySize = 22;
constexpr size_t kMaxCommentSize = 0xFFFF;

// Little-endian fields at an offset checked by the caller.
uint64_t Field(std::string_view bytes, uint64_t at, int width) {
  uint64_t value = 0;
  for (int i = width - 1; i >= 0; --i)
    value = (value << 8) |
            static_cast<unsigned char>(bytes[static_cast<size_t>(at) + static_cast<size_t>(i)]);
  return value;
}

}  // namespace

bool LooksLikeZip(std::string_view bytes) {
  return bytes.size() >= 4 && Field(bytes, 0, 4) == kLocalHeader;
}

ZipArchive::ZipArchive(std::string_view bytes, std::string source)
    : bytes_(bytes), source_(std::move(source)) {
  const auto fail = [&](const std::string& what) {
    throw std::runtime_error(source_ +
                             ": not a readable zip archive (as torch.save writes): " + what);
  };
  const auto need = [&](uint64_t at, uint64_t length, const char* what) {
    if (at > bytes_.size() || length > bytes_.size() - at)
      fail(std::string(what) + " lies past the end of the file (a truncated file?)");
  };
  if (bytes_.size() < kEndOfDirectorySize)
    fail("shorter than an end-of-central-directory record");
  // The end record is the last thing in the file but for a comment of up to 64 KiB.
  size_t end = std::string_view::npos;
  const size_t lowest = bytes_.size() - kEndOfDirectorySize > kMaxCommentSize
                            ? bytes_.size() - kEndOfDirectorySize - kMaxCommentSize
                            : 0;
  for (size_t at = bytes_.size() - kEndOfDirectorySize + 1; at-- > lowest;) {
    if (Field(bytes_, at, 4) == kEndOfDirectory) {
      end = at;
      break;
    }
  }
  if (end == std::string_view::npos)
    fail("no end-of-central-directory record");
  uint64_t disk = Field(bytes_, end + 4, 2);
  uint64_t directory_disk = Field(bytes_, end + 6, 2);
  uint64_t count = Field(bytes_, end + 10, 2);
  uint64_t directory_size = Field(bytes_, end + 12, 4);
  uint64_t directory_offset = Field(bytes_, end + 16, 4);
  if (count == 0xFFFF || directory_size == 0xFFFFFFFF || directory_offset == 0xFFFFFFFF) {
    // Zip64: the locator sits just before the end record and points at the zip64 record.
    if (end < 20 || Field(bytes_, end - 20, 4) != kZip64Locator)
      fail("a zip64 end record is announced but its locator is missing");
    const uint64_t record = Field(bytes_, end - 20 + 8, 8);
    need(record, 56, "the zip64 end-of-central-directory record");
    if (Field(bytes_, record, 4) != kZip64EndOfDirectory)
      fail("the zip64 locator points at no zip64 end record");
    disk = Field(bytes_, record + 16, 4);
    directory_disk = Field(bytes_, record + 20, 4);
    count = Field(bytes_, record + 32, 8);
    directory_size = Field(bytes_, record + 40, 8);
    directory_offset = Field(bytes_, record + 48, 8);
  }
  if (disk != 0 || directory_disk != 0)
    fail("the archive is split over several disks");
  need(directory_offset, directory_size, "the central directory");
  // Each central record takes at least 46 bytes, so the count cannot exceed what fits.
  if (count > directory_size / 46)
    fail("the central directory is smaller than its " + std::to_string(count) + " entries");

  uint64_t at = directory_offset;
  const uint64_t directory_end = directory_offset + directory_size;
  entries_.reserve(static_cast<size_t>(count));
  for (uint64_t i = 0; i < count; ++i) {
    if (at + 46 > directory_end || Field(bytes_, at, 4) != kCentralHeader)
      fail("central directory entry " + std::to_string(i) + " is damaged");
    ZipEntry entry;
    entry.flags = static_cast<uint16_t>(Field(bytes_, at + 8, 2));
    entry.method = static_cast<uint16_t>(Field(bytes_, at + 10, 2));
    entry.compressed_size = Field(bytes_, at + 20, 4);
    entry.size = Field(bytes_, at + 24, 4);
    const uint64_t name_length = Field(bytes_, at + 28, 2);
    const uint64_t extra_length = Field(bytes_, at + 30, 2);
    const uint64_t comment_length = Field(bytes_, at + 32, 2);
    entry.local_header_offset = Field(bytes_, at + 42, 4);
    const uint64_t record_end = at + 46 + name_length + extra_length + comment_length;
    if (record_end > directory_end)
      fail("central directory entry " + std::to_string(i) + " runs past the directory");
    entry.name.assign(
        bytes_.substr(static_cast<size_t>(at + 46), static_cast<size_t>(name_length)));
    // The zip64 extra field holds, in this order, the 64-bit values of whichever of the
    // three fields above were set to 0xFFFFFFFF.
    uint64_t extra = at + 46 + name_length;
    const uint64_t extra_end = extra + extra_length;
    while (extra + 4 <= extra_end) {
      const uint64_t id = Field(bytes_, extra, 2);
      const uint64_t length = Field(bytes_, extra + 2, 2);
      if (extra + 4 + length > extra_end)
        break;
      if (id == kZip64ExtraId) {
        uint64_t field = extra + 4;
        const uint64_t field_end = field + length;
        for (uint64_t* value : {&entry.size, &entry.compressed_size, &entry.local_header_offset}) {
          if (*value != 0xFFFFFFFF)
            continue;
          if (field + 8 > field_end)
            fail("entry '" + entry.name + "' has a short zip64 extra field");
          *value = Field(bytes_, field, 8);
          field += 8;
        }
      }
      extra += 4 + length;
    }
    entries_.push_back(std::move(entry));
    at = record_end;
  }
}

const ZipEntry* ZipArchive::Find(std::string_view name) const {
  for (const auto& entry : entries_) {
    if (entry.name == name)
      return &entry;
  }
  return nullptr;
}

std::string_view ZipArchive::Read(const ZipEntry& entry) const {
  const auto fail = [&](const std::string& what) {
    throw std::runtime_error(source_ + ": zip entry '" + entry.name + "' " + what);
  };
  if ((entry.flags & 0x1) != 0)
    fail("is encrypted; torch.save never encrypts: re-save the checkpoint with torch.save");
  if (entry.method != 0 || entry.compressed_size != entry.size) {
    fail("is compressed (method " + std::to_string(entry.method) +
         "); torch.save stores entries uncompressed, so this archive was re-zipped: re-save it "
         "with torch.save, or zip it again without compression (zip -0)");
  }
  const uint64_t header = entry.local_header_offset;
  if (header > bytes_.size() || bytes_.size() - header < 30 ||
      Field(bytes_, header, 4) != kLocalHeader)
    fail("has no local header where the central directory says (a damaged file?)");
  // The local header's own name and extra lengths decide where the data starts (torch pads
  // the extra field so that data is aligned to 64 bytes).
  const uint64_t data = header + 30 + Field(bytes_, header + 26, 2) + Field(bytes_, header + 28, 2);
  if (data > bytes_.size() || entry.size > bytes_.size() - data)
    fail("lies past the end of the file (a truncated file?)");
  return bytes_.substr(static_cast<size_t>(data), static_cast<size_t>(entry.size));
}

}  // namespace mrcnn::model::weights
