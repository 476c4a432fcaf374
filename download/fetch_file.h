#pragma once
// A file fetched into the weights cache as a training job needs it: whole, checked, and
// at most once per machine.
//  - The cache file, when there, is used (a zoo file whose name carries an md5 prefix is
//    checked once; the check is recorded beside it, weights_cache.h).
//  - Otherwise it is downloaded onto <file>.partial: tries resume where the last one
//    stopped, with backoff between them (download_options.h), then the md5 check, then a
//    rename into place, so the cache never holds a partial or unchecked file.
//  - Processes that fetch the same file at once (the ranks of one host) take turns through
//    a lock file: the first downloads, the others find it cached.
// s3:// URLs are signed (s3_location.h); http(s) go through the proxies proxy.h chooses.
#include <filesystem>
#include <string>

#include "common/env_map.h"
#include "download/download_options.h"
#include "download/http_download.h"

namespace mrcnn::download {

struct FetchSpec {
  std::string url;                    // https://, http:// or s3:// (the mirror applied)
  std::filesystem::path destination;  // the cache file (weights_cache.h, CachePathOf)
};

// Returns true when it downloaded, false when the cache held the file. Throws
// std::runtime_error saying what failed (the URL, the cause, the number of tries); the
// caller adds what the URL was for and the fix.
bool FetchToCache(const FetchSpec& spec, const DownloadOptions& options, const common::EnvMap& env,
                  const LogLine& log);

}  // namespace mrcnn::download
