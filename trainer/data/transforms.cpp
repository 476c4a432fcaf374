#include "trainer/data/transforms.h"

#include <algorithm>
#include <cmath>
#include <opencv2/imgproc.hpp>
#include <stdexcept>

#include "trainer/data/pil_bilinear_resize.h"
#include "trainer/data/random_crop.h"

namespace mrcnn::data {

int64_t DrawMinSize(const TransformSpec& spec, std::mt19937_64& rng) {
  if (!spec.training)
    return spec.min_sizes.back();
  if (spec.sampling == SizeSampling::kRange) {
    const int64_t low = spec.min_sizes.front(), high = spec.min_sizes.back();
    return low + static_cast<int64_t>(rng() % static_cast<uint64_t>(high - low + 1));
  }
  if (spec.min_sizes.size() == 1)
    return spec.min_sizes.front();
  return spec.min_sizes[rng() % spec.min_sizes.size()];
}

cv::Mat ResizeImage(const cv::Mat& rgb, int64_t height, int64_t width, ResizeFilter filter) {
  if (rgb.type() != CV_8UC3)
    throw std::invalid_argument("ResizeImage: the image must be 8-bit RGB (CV_8UC3)");
  if (height == rgb.rows && width == rgb.cols)
    return rgb;
  cv::Mat out;
  if (filter == ResizeFilter::kOpenCvBilinear) {
    cv::resize(rgb, out, cv::Size(static_cast<int>(width), static_cast<int>(height)), 0, 0,
               cv::INTER_LINEAR);
    return out;
  }
  out.create(static_cast<int>(height), static_cast<int>(width), CV_8UC3);
  ResizeBilinearLikePil({rgb.data, rgb.rows, rgb.cols, 3, static_cast<int64_t>(rgb.step[0])},
                        {out.data, height, width, 3, static_cast<int64_t>(out.step[0])});
  return out;
}

namespace {

const std::vector<int64_t> kNoFlip;

// One instance's keypoints as Detectron2's mapper leaves them: COCO's pixel indices moved
// to pixel centres (+0.5), resized and flipped like the boxes, a point outside the image
// marked unlabelled, the left/right pairs swapped by a flip, and unlabelled points all zero.
// An instance without keypoints (of a dataset that has them) gets num_keypoints unlabelled.
template <typename MapX>
std::vector<std::array<float, 3>> TransformKeypoints(const std::vector<float>& flat,
                                                     size_t num_keypoints, const MapX& map_x,
                                                     double scale_y, double width, double height,
                                                     const std::vector<int64_t>& flip) {
  std::vector<std::array<float, 3>> points(num_keypoints, {0.0f, 0.0f, 0.0f});
  if (flat.size() != 3 * num_keypoints)
    return points;
  for (size_t k = 0; k < num_keypoints; ++k) {
    const double x = map_x(flat[3 * k] + 0.5), y = (flat[3 * k + 1] + 0.5) * scale_y;
    const bool inside = x >= 0 && y >= 0 && x <= width && y <= height;
    points[k] = {static_cast<float>(x), static_cast<float>(y), inside ? flat[3 * k + 2] : 0.0f};
  }
  if (!flip.empty()) {
    if (flip.size() != num_keypoints)
      throw std::invalid_argument("TransformSpec::keypoint_flip has " +
                                  std::to_string(flip.size()) + " entries for " +
                                  std::to_string(num_keypoints) + " keypoints");
    std::vector<std::array<float, 3>> flipped(num_keypoints);
    for (size_t k = 0; k < num_keypoints; ++k)
      flipped[k] = points[static_cast<size_t>(flip[k])];
    points = std::move(flipped);
  }
  for (auto& p : points)
    if (p[2] == 0.0f)
      p = {0.0f, 0.0f, 0.0f};
  return points;
}

// The resize and flip of TransformInstances, on the image (or its crop) as given.
InstanceSample ResizeAndFlip(const cv::Mat& rgb, const CocoImage& image,
                             std::span<const CocoAnnotation> annotations, const TransformSpec& spec,
                             std::mt19937_64& rng) {
  InstanceSample s;
  s.image_id = image.id;
  s.original_height = rgb.rows;
  s.original_width = rgb.cols;
  const int64_t min_size = DrawMinSize(spec, rng);
  // A uniform draw in [0,1) from 53 random bits; portable, unlike the std distributions.
  const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;
  s.flipped = spec.training && u < spec.flip_probability;
  const auto [H, W] = ResizedSize(rgb.rows, rgb.cols, min_size, spec.max_size);
  s.scale_y = static_cast<double>(H) / rgb.rows;
  s.scale_x = static_cast<double>(W) / rgb.cols;
  s.image = ResizeImage(rgb, H, W, spec.filter);
  if (s.image.data == rgb.data)
    s.image = rgb.clone();  // the sample owns its pixels (and the flip below is in place)
  if (s.flipped)
    cv::flip(s.image, s.image, 1);
  const double fw = static_cast<double>(W);
  auto map_x = [&](double x) { return s.flipped ? fw - x * s.scale_x : x * s.scale_x; };
  size_t num_keypoints = 0;
  for (const auto& a : annotations)
    num_keypoints = std::max(num_keypoints, a.keypoints.size() / 3);
  for (const auto& a : annotations) {
    if (a.iscrowd || a.label <= 0)
      continue;
    if (num_keypoints > 0)
      s.keypoints.push_back(
          TransformKeypoints(a.keypoints, num_keypoints, map_x, s.scale_y, fw,
                             static_cast<double>(H), s.flipped ? spec.keypoint_flip : kNoFlip));
    const double x0 = map_x(a.bbox[0]), x1 = map_x(a.bbox[0] + a.bbox[2]);
    const double y0 = a.bbox[1] * s.scale_y, y1 = (a.bbox[1] + a.bbox[3]) * s.scale_y;
    s.boxes.push_back({static_cast<float>(std::min(x0, x1)), static_cast<float>(y0),
                       static_cast<float>(std::max(x0, x1)), static_cast<float>(y1)});
    s.labels.push_back(a.label);
    if (!spec.with_masks)
      continue;
    cv::Mat mask(static_cast<int>(H), static_cast<int>(W), CV_8U);
    if (const auto* polys = std::get_if<CocoPolygons>(&a.segmentation)) {
      CocoPolygons moved = *polys;
      for (auto& p : moved) {
        for (size_t i = 0; i + 1 < p.size(); i += 2) {
          p[i] = map_x(p[i]);
          p[i + 1] *= s.scale_y;
        }
      }
      Rle rle = RleFromPolygons(moved, H, W);
      auto bits = DecodeMask(rle);
      std::copy(bits.begin(), bits.end(), mask.data);
    } else if (const auto* rle = std::get_if<Rle>(&a.segmentation)) {
      auto bits = DecodeMask(*rle);
      cv::Mat full(static_cast<int>(rle->height), static_cast<int>(rle->width), CV_8U, bits.data());
      cv::resize(full, mask, mask.size(), 0, 0, cv::INTER_NEAREST);
      if (s.flipped)
        cv::flip(mask, mask, 1);
    } else {
      // No segmentation: the box is the mask.
      Rle box = RleFromBox({std::min(x0, x1), y0, std::abs(x1 - x0), y1 - y0}, H, W);
      auto bits = DecodeMask(box);
      std::copy(bits.begin(), bits.end(), mask.data);
    }
    s.masks.push_back(mask);
  }
  return s;
}

}  // namespace

InstanceSample TransformInstances(const cv::Mat& rgb, const CocoImage& image,
                                  std::span<const CocoAnnotation> annotations,
                                  const TransformSpec& spec, std::mt19937_64& rng) {
  if (spec.min_sizes.empty())
    throw std::invalid_argument("TransformSpec: min_sizes is empty");
  if (spec.sampling == SizeSampling::kRange &&
      (spec.min_sizes.size() != 2 || spec.min_sizes[0] > spec.min_sizes[1]))
    throw std::invalid_argument(
        "TransformSpec: a range needs min_sizes = {low, high}, low <= high");
  if (!spec.training || !spec.crop.enabled)
    return ResizeAndFlip(rgb, image, annotations, spec, rng);
  const MaskRegion window = RandomCropWindow(rgb.rows, rgb.cols, spec.crop, rng);
  const std::vector<CocoAnnotation> inside =
      CropAnnotations(annotations, window, rgb.rows, rgb.cols, spec.crop.min_area_fraction);
  const cv::Mat view =
      rgb(cv::Rect(static_cast<int>(window.x), static_cast<int>(window.y),
                   static_cast<int>(window.width), static_cast<int>(window.height)));
  return ResizeAndFlip(view, image, inside, spec, rng);
}

}  // namespace mrcnn::data
