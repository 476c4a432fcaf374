#include "trainer/engine/events/console_log.h"

#include <cstdio>

namespace mrcnn::engine {

void ConsoleLog::Line(const std::string& text) const {
  if (!enabled_)
    return;
  std::printf("%s\n", text.c_str());
  std::fflush(stdout);
}

}  // namespace mrcnn::engine
