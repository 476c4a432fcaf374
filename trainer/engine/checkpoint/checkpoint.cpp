#include "trainer/engine/checkpoint/checkpoint.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <regex>
#include <stdexcept>

#include "trainer/engine/checkpoint/atomic_file.h"
#include "trainer/model/safetensors.h"

namespace mrcnn::engine {
namespace {

namespace fs = std::filesystem;

constexpr const char* kIterationKey = "checkpoint/iteration";
constexpr const char* kCrcKey = "checkpoint/crc32";

const std::array<uint32_t, 256>& CrcTable() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  return table;
}

// Covers names, dtypes, shapes and bytes of every tensor except the CRC itself, in key
// order. Tensors are CPU contiguous here.
uint32_t ContentCrc(const std::map<std::string, at::Tensor>& tensors) {
  uint32_t crc = 0;
  for (const auto& [name, tensor] : tensors) {
    if (name == kCrcKey) continue;
    crc = Crc32(name.data(), name.size(), crc);
    std::string layout = c10::toString(tensor.scalar_type());
    for (int64_t d : tensor.sizes()) {
      layout.push_back(',');
      layout.append(std::to_string(d));
    }
    crc = Crc32(layout.data(), layout.size(), crc);
    crc = Crc32(tensor.data_ptr(), tensor.numel() * tensor.element_size(), crc);
  }
  return crc;
}

std::optional<int64_t> IterationOfName(const fs::path& file) {
  static const std::regex pattern(R"(checkpoint_([0-9]{8,})\.safetensors)");
  std::smatch m;
  const std::string name = file.filename().string();
  if (!std::regex_match(name, m, pattern)) return std::nullopt;
  return std::stoll(m[1]);
}

}  // namespace

uint32_t Crc32(const void* data, size_t size, uint32_t crc) {
  const auto& table = CrcTable();
  const auto* bytes = static_cast<const uint8_t*>(data);
  crc = ~crc;
  for (size_t i = 0; i < size; ++i) crc = table[(crc ^ bytes[i]) & 0xFFu] ^ (crc >> 8);
  return ~crc;
}

CheckpointDir::CheckpointDir(fs::path dir, int keep) : dir_(std::move(dir)), keep_(keep) {
  if (keep_ < 1) throw std::invalid_argument("SOLVER.CHECKPOINTS_TO_KEEP must be >= 1, got " + std::to_string(keep));
}

fs::path CheckpointDir::Save(int64_t iteration, const NamedTensors& tensors) const {
  std::map<std::string, at::Tensor> cpu;
  for (const auto& [name, tensor] : tensors) {
    if (name.rfind("checkpoint/", 0) == 0) {
      throw std::invalid_argument("checkpoint: tensor name '" + name + "' is reserved");
    }
    cpu[name] = tensor.detach().to(at::kCPU).contiguous();
  }
  cpu[kIterationKey] = at::tensor({iteration}, at::kLong);
  const uint32_t crc = ContentCrc(cpu);
  cpu[kCrcKey] = at::tensor({static_cast<int64_t>(crc)}, at::kLong);

  fs::create_directories(dir_);
  // Torch's bundled fmt headers shadow the system fmt here, so plain snprintf.
  char name[64];
  std::snprintf(name, sizeof name, "checkpoint_%08lld.safetensors", static_cast<long long>(iteration));
  const fs::path file = dir_ / name;
  const std::string bytes = model::SerializeSafetensors(cpu);
  try {
    WriteFileAtomically(file, bytes);
  } catch (const std::exception& e) {
    // Typically a full disk (ENOSPC): the older checkpoints are deleted only after the new
    // one is in place, so they are still there, and the partial write is gone.
    char size[64];
    std::snprintf(size, sizeof size, "%.1f MB", static_cast<double>(bytes.size()) / 1e6);
    throw std::runtime_error(
        "checkpoint " + file.string() + " (" + size + ") was not written: " + e.what() +
        "; the checkpoints already in " + dir_.string() +
        " are intact. Free space there (checkpointconfig.json LocalPath) or lower "
        "SOLVER.CHECKPOINTS_TO_KEEP: " +
        std::to_string(keep_ + 1) + " checkpoints must fit while the newest is written");
  }

  std::vector<fs::path> all = List();
  for (size_t i = 0; i + static_cast<size_t>(keep_) < all.size(); ++i) {
    std::error_code ec;
    fs::remove(all[i], ec);  // a failed delete only costs disk space
  }
  return file;
}

std::vector<fs::path> CheckpointDir::RemoveStaleTemporaries() const {
  return engine::RemoveStaleTemporaries(dir_, "checkpoint_");
}

std::vector<fs::path> CheckpointDir::List() const {
  std::vector<std::pair<int64_t, fs::path>> found;
  std::error_code ec;
  if (!fs::is_directory(dir_, ec)) return {};
  for (const auto& entry : fs::directory_iterator(dir_)) {
    if (!entry.is_regular_file()) continue;
    if (auto it = IterationOfName(entry.path())) found.emplace_back(*it, entry.path());
  }
  std::sort(found.begin(), found.end());
  std::vector<fs::path> paths;
  for (auto& f : found) paths.push_back(std::move(f.second));
  return paths;
}

LoadedCheckpoint CheckpointDir::Load(const fs::path& file) {
  auto tensors = model::ParseSafetensors(ReadWholeFile(file), file.string());
  auto iteration = tensors.find(kIterationKey);
  auto crc = tensors.find(kCrcKey);
  if (iteration == tensors.end() || crc == tensors.end() || iteration->second.numel() != 1 ||
      crc->second.numel() != 1) {
    throw std::runtime_error(file.string() + ": not a trainer checkpoint (no " + kIterationKey + "/" + kCrcKey + ")");
  }
  const auto stored = static_cast<uint32_t>(crc->second.item<int64_t>());
  const uint32_t actual = ContentCrc(tensors);
  if (stored != actual) {
    char why[96];
    std::snprintf(why, sizeof why, ": checksum mismatch (stored %08x, computed %08x): the file is corrupt", stored,
                  actual);
    throw std::runtime_error(file.string() + why);
  }
  LoadedCheckpoint out;
  out.path = file;
  out.iteration = iteration->second.item<int64_t>();
  tensors.erase(kIterationKey);
  tensors.erase(kCrcKey);
  out.tensors = std::move(tensors);
  return out;
}

std::optional<LoadedCheckpoint> CheckpointDir::LoadNewestValid(
    const std::function<void(const std::string&)>& warn) const {
  std::vector<fs::path> all = List();
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    try {
      return Load(*it);
    } catch (const std::exception& e) {
      warn(std::string("skipping checkpoint: ") + e.what());
    }
  }
  return std::nullopt;
}

}  // namespace mrcnn::engine
