#pragma once
// The central directory of a zip archive held in memory: what torch.save (torch >= 1.6)
// writes. Torch stores every entry uncompressed, so only stored entries can be opened;
// zip64 records (archives or entries past 4 GiB) are read. Torch-free.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mrcnn::model::weights {

struct ZipEntry {
  std::string name;
  uint16_t method = 0;  // 0 stored, 8 deflated, ...
  uint16_t flags = 0;
  uint64_t compressed_size = 0;
  uint64_t size = 0;
  uint64_t local_header_offset = 0;
};

// True when `bytes` starts like a zip archive (a local file header).
bool LooksLikeZip(std::string_view bytes);

class ZipArchive {
 public:
  // Reads the end-of-central-directory record and the central directory. Throws
  // std::runtime_error naming `source` when there is none, it is split over several disks,
  // or a record lies outside the input.
  ZipArchive(std::string_view bytes, std::string source);

  const std::vector<ZipEntry>& entries() const { return entries_; }
  // nullptr when no entry has this name.
  const ZipEntry* Find(std::string_view name) const;
  // The entry's bytes, a view into the input. Throws naming the file and the entry when it
  // is compressed or encrypted (torch never writes either: a re-zipped checkpoint; the
  // fix is to re-save it with torch.save or zip it again with `zip -0`) or its data lies
  // outside the input.
  std::string_view Read(const ZipEntry& entry) const;

 private:
  std::string_view bytes_;
  std::string source_;
  std::vector<ZipEntry> entries_;
};

}  // namespace mrcnn::model::weights
