#include "trainer/engine/config/weights_fetch.h"

#include <stdexcept>

#include "download/download_options.h"
#include "download/fetch_file.h"
#include "download/zoo_url.h"

namespace mrcnn::engine {

bool FetchWeightsFile(const std::string& weights_key, const std::string& url,
                      const std::filesystem::path& file, const common::EnvMap& env,
                      const WeightsLog& log) {
  try {
    return download::FetchToCache({url, file}, download::DownloadOptionsFromEnv(env), env, log);
  } catch (const std::exception& e) {
    const std::string mirror_hint = std::string(" set MRCNN_ZOO_MIRROR to a copy of ") +
                                    std::string(download::kZooPrefix) +
                                    " (s3://BUCKET/PREFIX/ or https://HOST/PREFIX/),";
    throw std::runtime_error("MODEL.WEIGHTS " + weights_key + ": " + e.what() + ". Fix: put " +
                             file.filename().string() +
                             " (or another .pkl, .pth or .safetensors checkpoint) in the weights "
                             "channel," +
                             mirror_hint + " or set MODEL.WEIGHTS \"\" to train from scratch");
  }
}

}  // namespace mrcnn::engine
