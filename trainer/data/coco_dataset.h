#pragma once
// A COCO "instances" file in memory: images, categories (with a contiguous label space
// 1..K for the model) and annotations grouped by image. Torch-free and OpenCV-free
// (target mrcnn_coco); parsed with a streaming reader, no JSON DOM is built.
//
// Bad-data policy (see CocoLoadOptions): structural errors are fatal (malformed JSON,
// top level not an object, "images"/"annotations"/"categories" of the wrong type, a
// malformed or duplicate category); bad items (an image without id/size, an annotation
// with an unknown image or category, a box with zero area or outside the image, a
// malformed segmentation) are skipped and counted, or fatal when bad_items == kFail.
// Every message names the file and the item (array index and id).
#include <array>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "trainer/data/mask_rle.h"

namespace mrcnn::data {

struct CocoCategory {
  int64_t id = 0;
  std::string name;
  std::string supercategory;
  // Person-style keypoint categories: the keypoints' names in annotation order and the
  // skeleton's 1-based pairs (both empty when the category has none).
  std::vector<std::string> keypoints;
  std::vector<std::array<int64_t, 2>> skeleton;
};

struct CocoImage {
  int64_t id = 0;
  std::string file_name;
  int64_t width = 0;
  int64_t height = 0;
};

// Polygons of one object: each [x0, y0, x1, y1, ...] in pixels.
using CocoPolygons = std::vector<std::vector<double>>;
// No segmentation, polygons, or an RLE (compressed and uncompressed RLE are both decoded
// to counts; rle.height/width are the RLE's own "size").
using CocoSegmentation = std::variant<std::monostate, CocoPolygons, Rle>;

struct CocoAnnotation {
  int64_t id = 0;
  int64_t image_id = 0;
  int64_t category_id = 0;
  int64_t label = 0;             // contiguous 1..K (0 when the category is unknown and kept raw)
  std::array<double, 4> bbox{};  // [x, y, w, h]
  double area = 0;
  bool iscrowd = false;
  CocoSegmentation segmentation;
  // COCO keypoints: x, y, v per keypoint (v 0 = not labelled, 1 = labelled but not visible,
  // 2 = visible), in the category's keypoint order; empty when the annotation has none.
  std::vector<float> keypoints;
  int64_t num_keypoints = 0;  // the file's "num_keypoints" (labelled points), 0 when absent
};

enum class BadItemPolicy { kSkip, kFail };

struct CocoLoadOptions {
  BadItemPolicy bad_items = BadItemPolicy::kSkip;
  // Training view: drop bad annotations (see above) and clip boxes that stick out of the
  // image. Evaluation sets this false to keep the ground truth exactly as written, as
  // pycocotools does (only structural errors are reported then).
  bool validate_annotations = true;
  // Training view: drop images that end up with no (non-crowd) annotation.
  bool drop_images_without_annotations = false;
  // Training view of a keypoint model: drop images with fewer labelled keypoints (v > 0,
  // summed over their annotations) than this, as Detectron2's
  // filter_images_with_few_keypoints (MODEL.ROI_KEYPOINT_HEAD.MIN_KEYPOINTS_PER_IMAGE); 0 keeps all.
  int64_t min_keypoints_per_image = 0;
  // Skip parsing "segmentation" (faster when only boxes are needed).
  bool load_segmentation = true;
  // How many skip messages are kept in the report (all are counted).
  size_t max_kept_messages = 20;
};

struct CocoLoadReport {
  int64_t skipped_images = 0;
  int64_t skipped_annotations = 0;
  int64_t clipped_boxes = 0;
  int64_t dropped_empty_images = 0;
  int64_t dropped_few_keypoint_images = 0;  // CocoLoadOptions::min_keypoints_per_image
  std::vector<std::string> messages;  // first max_kept_messages skip reasons
};

class CocoDataset {
 public:
  // Throws std::runtime_error naming the file (and line:column for syntax errors).
  static CocoDataset Load(const std::filesystem::path& json_path,
                          const CocoLoadOptions& options = {});
  // `source` names the text in messages.
  static CocoDataset Parse(std::string_view json_text, const std::string& source,
                           const CocoLoadOptions& options = {});

  const std::vector<CocoImage>& images() const { return images_; }
  // Sorted by category id; label of categories()[i] is i + 1.
  const std::vector<CocoCategory>& categories() const { return categories_; }
  // All annotations, grouped by image in images() order, file order within an image.
  const std::vector<CocoAnnotation>& annotations() const { return annotations_; }
  std::span<const CocoAnnotation> AnnotationsOfImage(size_t image_index) const;
  // Index into images() or -1.
  int64_t ImageIndex(int64_t image_id) const;

  int64_t NumClasses() const { return static_cast<int64_t>(categories_.size()); }
  // Contiguous label 1..K of a category id, or 0 when unknown.
  int64_t LabelOfCategory(int64_t category_id) const;
  // Category id of a label 1..K; throws std::out_of_range otherwise.
  int64_t CategoryOfLabel(int64_t label) const;
  // Class names by label - 1.
  std::vector<std::string> ClassNames() const;

  const CocoLoadReport& report() const { return report_; }
  const std::string& source() const { return source_; }

 private:
  friend class CocoFileReader;
  std::string source_;
  std::vector<CocoImage> images_;
  std::vector<CocoCategory> categories_;
  std::vector<CocoAnnotation> annotations_;
  std::vector<size_t> image_offsets_;  // images_.size() + 1 offsets into annotations_
  std::unordered_map<int64_t, int64_t> image_index_;
  std::unordered_map<int64_t, int64_t> label_of_category_;
  CocoLoadReport report_;
};

// Rasterises an annotation's segmentation to an RLE of the image size, as pycocotools
// COCO.annToRLE does (polygons merged; an empty segmentation gives an empty mask).
Rle AnnotationToRle(const CocoAnnotation& annotation, int64_t image_height, int64_t image_width);

}  // namespace mrcnn::data
