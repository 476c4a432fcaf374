#pragma once
// A throwaway /opt/ml-shaped tree for tests: created under the system temp dir,
// removed with everything in it when the object goes out of scope.
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>

namespace mrcnn::common::testing {

class JobTree {
 public:
  JobTree() {
    static std::atomic<int> counter{0};
    base_ = std::filesystem::temp_directory_path() /
            ("mrcnn_common_test_" + std::to_string(getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(base_);
    std::filesystem::create_directories(base_ / "input" / "config");
  }
  ~JobTree() {
    std::error_code ec;
    std::filesystem::remove_all(base_, ec);
  }
  JobTree(const JobTree&) = delete;
  JobTree& operator=(const JobTree&) = delete;

  const std::filesystem::path& base() const { return base_; }
  std::filesystem::path config(const std::string& name) const {
    return base_ / "input" / "config" / name;
  }

  // Writes input/config/<name> with exactly `text`; returns its path.
  std::filesystem::path WriteConfig(const std::string& name, const std::string& text) const {
    return Write(config(name), text);
  }
  static std::filesystem::path Write(const std::filesystem::path& path, const std::string& text) {
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
  void MakeDir(const std::filesystem::path& relative) const {
    std::filesystem::create_directories(base_ / relative);
  }

 private:
  std::filesystem::path base_;
};

}  // namespace mrcnn::common::testing
