// The stand-in for builds without download/'s network part (no OpenSSL): a URL in
// MODEL.WEIGHTS fails the job at once, naming what to do instead.
#include <stdexcept>

#include "trainer/engine/config/weights_fetch.h"

namespace mrcnn::engine {

bool FetchWeightsFile(const std::string& weights_key, const std::string& url,
                      const std::filesystem::path& file, const common::EnvMap&, const WeightsLog&) {
  if (std::filesystem::is_regular_file(file))
    return false;
  throw std::runtime_error("MODEL.WEIGHTS " + weights_key +
                           ": this trainer was built without "
                           "downloads (no OpenSSL), so " +
                           url + " is not fetched. Fix: put " + file.filename().string() +
                           " in the weights channel");
}

}  // namespace mrcnn::engine
