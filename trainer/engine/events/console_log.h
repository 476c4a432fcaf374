#pragma once
// The trainer's stdout: rank 0 prints, every line flushed at once so the entrypoint
// forwards it whole and without delay. Other ranks' ConsoleLog prints nothing. Torch-free.
#include <string>

namespace mrcnn::engine {

class ConsoleLog {
 public:
  explicit ConsoleLog(bool enabled) : enabled_(enabled) {}
  void Line(const std::string& text) const;
  bool enabled() const { return enabled_; }

 private:
  bool enabled_;
};

}  // namespace mrcnn::engine
