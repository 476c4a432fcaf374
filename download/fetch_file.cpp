#include "download/fetch_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "download/download_error.h"
#include "download/file_md5.h"
#include "download/md5_name.h"
#include "download/s3_location.h"
#include "download/weights_cache.h"
#include "tracking/aws_credentials.h"

namespace mrcnn::download {
namespace fs = std::filesystem;
namespace {

// An exclusive flock held for the object's life; the kernel drops it if the process dies.
class FileLock {
 public:
  explicit FileLock(const fs::path& path) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0 || ::flock(fd_, LOCK_EX) != 0) {
      throw std::runtime_error("cannot lock " + path.string() + ": " + std::strerror(errno));
    }
  }
  ~FileLock() { ::close(fd_); }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

DownloadTarget TargetOf(const std::string& url, const common::EnvMap& env) {
  DownloadTarget target;
  target.name = fs::path(url.substr(0, url.find('?'))).filename().string();
  if (!url.starts_with("s3://")) {
    target.url = ParseUrl(url);
    return target;
  }
  const S3Address address = S3AddressOf(ParseS3Url(url), env);
  target.url = address.url;
  auto credentials = std::make_shared<tracking::AwsCredentialSource>(env);
  target.sign = [address, credentials](const tracking::HeaderList& headers) {
    return SignS3Get(address, headers, credentials->Get(), std::chrono::system_clock::now());
  };
  return target;
}

// Whether `file` has the md5 its name promises. The answer is recorded beside the cache file
// ("<md5> <size>"), so a cached file is read in full once, not at every start; `trust_record`
// is false for a fresh download, which is always read.
bool Md5Holds(const fs::path& file, const std::string& prefix, const fs::path& record,
              bool trust_record, std::string* md5_out) {
  const std::string size = std::to_string(fs::file_size(file));
  std::string recorded_md5, recorded_size;
  if (std::ifstream in(record); trust_record && in)
    in >> recorded_md5 >> recorded_size;
  if (Md5MatchesPrefix(recorded_md5, prefix) && recorded_size == size)
    return true;
  const std::string md5 = Md5HexOfFile(file);
  if (md5_out)
    *md5_out = md5;
  if (!Md5MatchesPrefix(md5, prefix))
    return false;
  std::ofstream(record) << md5 << " " << size << "\n";
  return true;
}

// Whether the cache holds the file; a cached file that fails its md5 is removed.
bool CachedAndSound(const fs::path& destination, const LogLine& log) {
  std::error_code ec;
  if (!fs::is_regular_file(destination, ec))
    return false;
  const auto prefix = Md5PrefixInName(destination.filename().string());
  if (!prefix || Md5Holds(destination, *prefix, VerifiedPathOf(destination), true, nullptr))
    return true;
  log("[weights] " + destination.string() + " does not have the md5 its name starts with (" +
      *prefix + "): removed, fetching it again");
  fs::remove(destination, ec);
  fs::remove(VerifiedPathOf(destination), ec);
  return false;
}

void Download(const FetchSpec& spec, const DownloadOptions& options, const common::EnvMap& env,
              const LogLine& log) {
  const DownloadTarget target = TargetOf(spec.url, env);
  const fs::path partial = PartialPathOf(spec.destination);
  const auto started = std::chrono::steady_clock::now();
  for (int attempt = 1;; ++attempt) {
    try {
      DownloadOnce(target, partial, options, env, log);
      return;
    } catch (const DownloadError& e) {
      const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(
          std::chrono::steady_clock::now() - started);
      const std::string tries = std::to_string(attempt) + (attempt == 1 ? " try" : " tries");
      if (!e.retryable() || attempt >= options.attempts) {
        throw std::runtime_error("downloading " + spec.url + " failed: " + e.what() + " (" + tries +
                                 " in " + std::to_string(seconds.count()) + " s)");
      }
      const auto wait = BackoffAfter(options, attempt);
      log("[weights] try " + std::to_string(attempt) + " of " + std::to_string(options.attempts) +
          " at " + spec.url + " failed: " + e.what() + "; trying again in " +
          std::to_string(wait.count()) + " ms");
      std::this_thread::sleep_for(wait);
    }
  }
}

// The downloaded file's md5 against its name, before it may enter the cache.
void CheckDownloaded(const FetchSpec& spec, const fs::path& partial) {
  const auto prefix = Md5PrefixInName(spec.destination.filename().string());
  if (!prefix)
    return;
  std::string md5;
  if (Md5Holds(partial, *prefix, VerifiedPathOf(spec.destination), false, &md5))
    return;
  std::error_code ec;
  fs::remove(partial, ec);
  throw std::runtime_error("downloading " + spec.url + " gave a file whose md5 is " + md5 +
                           ", but its name says the md5 starts with " + *prefix +
                           " (a different or damaged file)");
}

}  // namespace

bool FetchToCache(const FetchSpec& spec, const DownloadOptions& options, const common::EnvMap& env,
                  const LogLine& log) {
  fs::create_directories(spec.destination.parent_path());
  const FileLock lock(LockPathOf(spec.destination));
  if (CachedAndSound(spec.destination, log)) {
    log("[weights] using " + spec.destination.string() + " (cached; nothing downloaded)");
    return false;
  }
  log("[weights] downloading " + spec.url + " into " + spec.destination.string());
  Download(spec, options, env, log);
  CheckDownloaded(spec, PartialPathOf(spec.destination));
  fs::rename(PartialPathOf(spec.destination), spec.destination);
  log("[weights] downloaded " + spec.url + " (" + std::to_string(fs::file_size(spec.destination)) +
      " bytes)");
  return true;
}

}  // namespace mrcnn::download
