#pragma once
// One try at a download: GET the URL (asking for the rest of the partial file with Range when
// it holds some bytes), follow redirects, and stream the body onto the partial file as it
// arrives, so a try that fails leaves every byte it got for the next one to resume from
// (resume_plan.h says what each answer to a Range request means).
#include <filesystem>
#include <functional>
#include <string>

#include "common/env_map.h"
#include "download/download_options.h"
#include "download/url.h"
#include "tracking/aws_sigv4.h"

namespace mrcnn::download {

struct DownloadTarget {
  Url url;
  // Headers to add for the first URL (S3's signature; it covers the Range header it is
  // given); redirected requests go unsigned. May be empty.
  std::function<tracking::HeaderList(const tracking::HeaderList& headers)> sign;
  std::string name;  // the file's name, for progress lines
};

using LogLine = std::function<void(const std::string&)>;

// Returns when `partial` holds the whole body. Throws DownloadError (download_error.h); the
// partial file keeps what was received.
void DownloadOnce(const DownloadTarget& target, const std::filesystem::path& partial,
                  const DownloadOptions& options, const common::EnvMap& env, const LogLine& log);

}  // namespace mrcnn::download
