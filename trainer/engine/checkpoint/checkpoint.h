#pragma once
// Training checkpoints in one directory (checkpointconfig.json LocalPath, which SageMaker
// syncs to S3): "checkpoint_<iteration, 8 digits>.safetensors", written atomically (staged
// beside the directory and renamed in, so the upload never sees a partial file), the
// newest K kept. Each file is a safetensors map of named tensors (model/*, optimizer/*,
// scaler/*, rng/*, ...) plus "checkpoint/iteration" and "checkpoint/crc32": a CRC-32 over
// every other tensor's name and bytes in key order, so a corrupted or truncated file is
// detected and skipped on resume.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mrcnn::engine {

using NamedTensors = std::map<std::string, at::Tensor>;

struct LoadedCheckpoint {
  std::filesystem::path path;
  int64_t iteration = 0;
  NamedTensors tensors;  // without the checkpoint/* bookkeeping entries
};

// CRC-32 (IEEE, as zlib) continuing from `crc`.
uint32_t Crc32(const void* data, size_t size, uint32_t crc = 0);

class CheckpointDir {
 public:
  // keep >= 1: how many checkpoints survive a Save.
  CheckpointDir(std::filesystem::path dir, int keep);

  // Writes the checkpoint of `iteration` (creating the directory), then deletes all but
  // the newest `keep`. Returns the file written. Tensors may be on any device.
  std::filesystem::path Save(int64_t iteration, const NamedTensors& tensors) const;

  // Removes partial writes (checkpoint_*.tmp<pid>) of writers that are gone, here and in
  // the staging directory beside it (atomic_file.h); returns what was removed. Called
  // once at start by the one process that writes checkpoints.
  std::vector<std::filesystem::path> RemoveStaleTemporaries() const;

  // Checkpoint files present, oldest first (temporary files are not listed).
  std::vector<std::filesystem::path> List() const;

  // Reads and verifies one file; throws std::runtime_error naming the file and the problem.
  static LoadedCheckpoint Load(const std::filesystem::path& file);

  // The newest checkpoint that loads and verifies; each one skipped is reported through
  // `warn` with the reason. nullopt when none is valid.
  std::optional<LoadedCheckpoint> LoadNewestValid(const std::function<void(const std::string&)>& warn) const;

  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
  int keep_;
};

}  // namespace mrcnn::engine
