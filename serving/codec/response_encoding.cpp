#include "serving/codec/response_encoding.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "trainer/data/mask_rle.h"

namespace mrcnn::serving {
namespace {
// Class names and details may carry arbitrary bytes; never let them make dump() throw.
constexpr auto kReplaceInvalidUtf8 = nlohmann::json::error_handler_t::replace;

nlohmann::json EncodeImage(const ImageDetections& image, bool asked_masks) {
  const bool masks = asked_masks && image.has_masks;
  nlohmann::json detections = nlohmann::json::array();
  for (const Detection& detection : image.detections) {
    nlohmann::json item = {
        {"box", {detection.box[0], detection.box[1], detection.box[2], detection.box[3]}},
        {"label", detection.label},
        {"category_id", detection.category_id},
        {"score", detection.score},
    };
    if (masks) {
      const data::Rle rle = DetectionMaskRle(detection, image);
      item["mask"] = {{"size", {image.height, image.width}},
                      {"counts", data::RleCountsToString(rle)}};
    }
    if (!detection.keypoints.empty()) {
      // Keypoint R-CNN: [x, y, score] per keypoint, COCO's pixel indices.
      nlohmann::json points = nlohmann::json::array();
      for (const auto& p : detection.keypoints)
        points.push_back(nlohmann::json::array({p[0], p[1], p[2]}));
      item["keypoints"] = std::move(points);
    }
    detections.push_back(std::move(item));
  }
  return {{"height", image.height}, {"width", image.width}, {"detections", std::move(detections)}};
}

}  // namespace

data::Rle DetectionMaskRle(const Detection& detection, const ImageDetections& image) {
  if (!detection.mask_rle.counts.empty()) {
    if (detection.mask_rle.height != image.height || detection.mask_rle.width != image.width) {
      throw std::runtime_error(fmt::format(
          "the predictor returned a {}x{} mask RLE for a {}x{} image", detection.mask_rle.width,
          detection.mask_rle.height, image.width, image.height));
    }
    return detection.mask_rle;
  }
  const data::MaskRegion whole{0, 0, image.width, image.height};
  const data::MaskRegion region =
      detection.mask_region == data::MaskRegion{} ? whole : detection.mask_region;
  if (detection.mask.size() != static_cast<size_t>(region.height * region.width)) {
    throw std::runtime_error(fmt::format(
        "the predictor returned a mask of {} values for a {}x{} region (expected {})",
        detection.mask.size(), region.width, region.height, region.height * region.width));
  }
  return data::EncodeMaskRegion(detection.mask.data(), region, image.height, image.width);
}

std::string EncodeDetectionsJson(const std::vector<ImageDetections>& images, bool list_form,
                                 bool masks) {
  if (!list_form) {
    return EncodeImage(images.at(0), masks).dump(-1, ' ', false, kReplaceInvalidUtf8);
  }
  nlohmann::json predictions = nlohmann::json::array();
  for (const ImageDetections& image : images) {
    predictions.push_back(EncodeImage(image, masks));
  }
  return nlohmann::json{{"predictions", std::move(predictions)}}.dump(-1, ' ', false,
                                                                      kReplaceInvalidUtf8);
}

}  // namespace mrcnn::serving

namespace mrcnn::serving {

std::string EncodeRecordJson(const ImageDetections& image, bool masks,
                             const std::optional<nlohmann::json>& id) {
  nlohmann::json record = EncodeImage(image, masks);
  if (id) {
    record["id"] = *id;
  }
  return record.dump(-1, ' ', false, kReplaceInvalidUtf8);
}

std::string EncodeRecordErrorJson(const std::string& code, const std::string& detail,
                                  const std::optional<nlohmann::json>& id) {
  nlohmann::json record = {{"error", code}, {"detail", detail}};
  if (id) {
    record["id"] = *id;
  }
  return record.dump(-1, ' ', false, kReplaceInvalidUtf8);
}

}  // namespace mrcnn::serving
