#include "download/zoo_url.h"

#include <array>
#include <stdexcept>
#include <utility>

namespace mrcnn::download {
namespace {

constexpr std::string_view kDetectron2Scheme = "detectron2://";
constexpr std::string_view kCatalogScheme = "catalog://";
constexpr std::string_view kImageNetPrefix = "ImageNetPretrained/";

// Detectron2's ModelCatalog.C2_IMAGENET_MODELS: the files sit in Detectron1's bucket
// ("detectron", not "detectron2"), several under the id of the job that made them.
constexpr std::array<std::pair<std::string_view, std::string_view>, 7> kImageNetModels = {{
    {"MSRA/R-50", "ImageNetPretrained/MSRA/R-50.pkl"},
    {"MSRA/R-101", "ImageNetPretrained/MSRA/R-101.pkl"},
    {"FAIR/R-50-GN", "ImageNetPretrained/47261647/R-50-GN.pkl"},
    {"FAIR/R-101-GN", "ImageNetPretrained/47592356/R-101-GN.pkl"},
    {"FAIR/X-101-32x8d", "ImageNetPretrained/20171220/X-101-32x8d.pkl"},
    {"FAIR/X-101-64x4d", "ImageNetPretrained/FBResNeXt/X-101-64x4d.pkl"},
    {"FAIR/X-152-32x8d-IN5k", "ImageNetPretrained/25093814/X-152-32x8d-IN5k.pkl"},
}};

std::string JoinedCatalogNames() {
  std::string names;
  for (const std::string& name : CatalogNames()) {
    names += (names.empty() ? "" : ", ") + std::string(kCatalogScheme) + name;
  }
  return names;
}

}  // namespace

std::vector<std::string> CatalogNames() {
  std::vector<std::string> names;
  for (const auto& [name, file] : kImageNetModels) {
    names.push_back(std::string(kImageNetPrefix) + std::string(name));
  }
  return names;
}

std::string CatalogUrl(std::string_view name) {
  if (name.starts_with(kImageNetPrefix)) {
    const std::string_view model = name.substr(kImageNetPrefix.size());
    for (const auto& [known, file] : kImageNetModels) {
      if (known == model)
        return std::string(kZooPrefix) + "detectron/" + std::string(file);
    }
  }
  throw std::invalid_argument("catalog://" + std::string(name) +
                              " is not in Detectron2's model catalog; the known names are " +
                              JoinedCatalogNames());
}

std::string ApplyZooMirror(const std::string& url, const std::string& mirror) {
  if (mirror.empty() || !url.starts_with(kZooPrefix))
    return url;
  const std::string base = mirror.ends_with('/') ? mirror : mirror + "/";
  return base + url.substr(kZooPrefix.size());
}

std::optional<std::string> WeightsUrl(const std::string& weights, const std::string& mirror) {
  std::string url;
  if (weights.starts_with(kDetectron2Scheme)) {
    const std::string path = weights.substr(kDetectron2Scheme.size());
    if (path.empty())
      throw std::invalid_argument("detectron2:// names no file");
    url = std::string(kZooPrefix) + "detectron2/" + path;
  } else if (weights.starts_with(kCatalogScheme)) {
    url = CatalogUrl(std::string_view(weights).substr(kCatalogScheme.size()));
  } else if (weights.starts_with("gs://")) {
    throw std::invalid_argument(
        "gs:// URLs are not downloaded (Google Cloud Storage needs its own credentials); use "
        "its https://storage.googleapis.com/BUCKET/OBJECT form for a public object, or s3://");
  } else if (weights.starts_with("https://") || weights.starts_with("http://") ||
             weights.starts_with("s3://")) {
    url = weights;
  } else {
    return std::nullopt;
  }
  return ApplyZooMirror(url, mirror);
}

}  // namespace mrcnn::download
