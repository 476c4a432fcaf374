#pragma once
// Where Detectron2 fetches a MODEL.WEIGHTS value from, as its own handlers resolve it
// (detectron2/utils/file_io.py and checkpoint/catalog.py), with the project's mirror applied:
//   detectron2://X                     -> https://dl.fbaipublicfiles.com/detectron2/X
//   catalog://ImageNetPretrained/NAME  ->
//   https://dl.fbaipublicfiles.com/detectron/ImageNetPretrained/...
//                                         (Detectron1's bucket, per Detectron2's catalog table)
//   https://..., http://..., s3://bucket/key -> themselves
//   anything else                      -> not a URL (a path)
// MRCNN_ZOO_MIRROR replaces the prefix https://dl.fbaipublicfiles.com/ of every URL that has it
// (s3://my-bucket/zoo/ or https://host:port/), so a job without the internet, or one that
// should not depend on Facebook's bucket, reads the same paths from its own copy.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mrcnn::download {

inline constexpr std::string_view kZooPrefix = "https://dl.fbaipublicfiles.com/";

// The URL `weights` names after the mirror, or nullopt when it is not a URL. Throws
// std::invalid_argument for gs:// (no signer for Google Cloud Storage here), an unknown
// catalog:// name (the message lists the known ones) and an empty detectron2:// path.
std::optional<std::string> WeightsUrl(const std::string& weights, const std::string& mirror);

// catalog://ImageNetPretrained/NAME's URL without a mirror; `name` is what follows catalog://.
std::string CatalogUrl(std::string_view name);

// The catalog names Detectron2 knows (ImageNetPretrained/MSRA/R-50, ...), in its order.
std::vector<std::string> CatalogNames();

// `url` with kZooPrefix replaced by `mirror` (a trailing '/' is added when missing); other
// URLs, and every URL when `mirror` is empty, are returned unchanged.
std::string ApplyZooMirror(const std::string& url, const std::string& mirror);

}  // namespace mrcnn::download
