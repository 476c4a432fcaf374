#include "entrypoint/torchelastic_error_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <system_error>

#include "entrypoint/fd_io.h"

namespace mrcnn::entrypoint {

std::string TorchelasticErrorJson(const std::string& report,
                                  std::chrono::system_clock::time_point when) {
  std::string first_line = report.substr(0, report.find('\n'));
  const auto seconds =
      std::chrono::duration_cast<std::chrono::seconds>(when.time_since_epoch()).count();
  const nlohmann::json doc = {
      {"message",
       {{"message", first_line},
        {"extraInfo", {{"py_callstack", report}, {"timestamp", std::to_string(seconds)}}}}}};
  return doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

bool WriteTorchelasticErrorFile(const std::filesystem::path& file, const std::string& report,
                                std::chrono::system_clock::time_point when) {
  std::error_code ec;
  if (file.has_parent_path())
    std::filesystem::create_directories(file.parent_path(), ec);
  const int fd = open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    if (errno == EEXIST) {
      LogLine(fmt::format("{} (TORCHELASTIC_ERROR_FILE) exists already; leaving it as it is",
                          file.string()));
    } else {
      LogLine(fmt::format("cannot write TORCHELASTIC_ERROR_FILE {}: {}", file.string(),
                          std::strerror(errno)));
    }
    return false;
  }
  const bool ok = WriteAll(fd, TorchelasticErrorJson(report, when));
  close(fd);
  return ok;
}

}  // namespace mrcnn::entrypoint
