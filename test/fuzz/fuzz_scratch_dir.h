#pragma once
// A folder of a fuzzing process's own under the temp dir (TMPDIR), made on first use and
// removed with everything in it when the process exits (libFuzzer ends with exit(0)).
// A static's destructor, not an std::atexit callback registered while that static is being
// made: exit runs both in the reverse order of their registration, so such a callback ran
// after the static's path was destroyed, removed nothing, and each run left its folder.
#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

namespace mrcnn::fuzz {

class FuzzScratchDir {
 public:
  // PREFIX names the folder: PREFIX.XXXXXX under the temp dir. Aborts when it cannot be made.
  explicit FuzzScratchDir(const std::string& prefix) {
    std::string pattern = (std::filesystem::temp_directory_path() / (prefix + ".XXXXXX")).string();
    if (mkdtemp(pattern.data()) == nullptr)
      std::abort();
    path_ = pattern;
  }
  ~FuzzScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  FuzzScratchDir(const FuzzScratchDir&) = delete;
  FuzzScratchDir& operator=(const FuzzScratchDir&) = delete;

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace mrcnn::fuzz
