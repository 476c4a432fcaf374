#include "trainer/data/coco_dataset.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <stdexcept>
#include <unordered_set>

#include "trainer/data/coco_json_fields.h"
#include "trainer/data/json_cursor.h"
#include "trainer/data/whole_file.h"

namespace mrcnn::data {

namespace {

struct RawAnnotation {
  CocoAnnotation ann;
  size_t index = 0;  // position in the "annotations" array
  bool has_image = false, has_category = false, has_bbox = false, has_area = false;
  std::string problem;  // first type error met while reading, if any
};

struct RawImage {
  CocoImage image;
  size_t index = 0;
  bool has_id = false, has_size = false;
  std::string problem;
};

}  // namespace

// Reads one COCO file with a JsonCursor and applies the bad-data policy.
class CocoFileReader {
 public:
  CocoFileReader(std::string_view text, const std::string& source, const CocoLoadOptions& opt)
      : cur_(text, source), source_(source), opt_(opt) {}

  CocoDataset Read() {
    if (cur_.Peek() != JsonCursor::Kind::kObject) {
      cur_.Fail(
          "the top level of a COCO file must be an object with \"images\", "
          "\"annotations\" and \"categories\"");
    }
    bool saw_images = false, saw_categories = false;
    cur_.ForEachMember([&](std::string_view key) {
      if (key == "images") {
        saw_images = true;
        RequireArray("images");
        cur_.ForEachElement([&](size_t i) { ReadImage(i); });
      } else if (key == "annotations") {
        RequireArray("annotations");
        cur_.ForEachElement([&](size_t i) { ReadAnnotation(i); });
      } else if (key == "categories") {
        saw_categories = true;
        RequireArray("categories");
        cur_.ForEachElement([&](size_t i) { ReadCategory(i); });
      } else {
        cur_.Skip();
      }
    });
    cur_.ExpectEnd();
    if (!saw_images)
      Structural("has no \"images\" array");
    if (!saw_categories)
      Structural("has no \"categories\" array");
    return Assemble();
  }

 private:
  [[noreturn]] void Structural(const std::string& what) {
    throw std::runtime_error(source_ + ": " + what + " (this is a structural error in the " +
                             "COCO file; fix the file)");
  }

  void RequireArray(const char* key) {
    auto k = cur_.Peek();
    if (k != JsonCursor::Kind::kArray) {
      cur_.Fail(std::string("\"") + key + "\" must be an array, found " + JsonCursor::KindName(k));
    }
  }

  void Bad(const std::string& item, const std::string& why) {
    std::string msg = source_ + ": " + item + ": " + why;
    if (opt_.bad_items == BadItemPolicy::kFail) {
      throw std::runtime_error(msg +
                               " (bad_items policy is 'fail'; fix the item or set it to "
                               "'skip')");
    }
    if (ds_.report_.messages.size() < opt_.max_kept_messages) {
      ds_.report_.messages.push_back(msg + "; skipped");
    }
  }

  void ReadImage(size_t index) {
    RawImage raw;
    raw.index = index;
    if (cur_.Peek() != JsonCursor::Kind::kObject) {
      raw.problem = std::string("must be an object, found ") + JsonCursor::KindName(cur_.Peek());
      cur_.Skip();
      images_.push_back(std::move(raw));
      return;
    }
    bool has_w = false, has_h = false;
    cur_.ForEachMember([&](std::string_view key) {
      if (key == "id") {
        if (auto v = ReadIntegerField(cur_, key, &raw.problem)) {
          raw.image.id = *v;
          raw.has_id = true;
        }
      } else if (key == "file_name") {
        if (cur_.Peek() != JsonCursor::Kind::kString) {
          if (raw.problem.empty())
            raw.problem = "\"file_name\" must be a string";
          cur_.Skip();
        } else {
          raw.image.file_name = std::string(cur_.String(&scratch_));
        }
      } else if (key == "width") {
        if (auto v = ReadIntegerField(cur_, key, &raw.problem)) {
          raw.image.width = *v;
          has_w = true;
        }
      } else if (key == "height") {
        if (auto v = ReadIntegerField(cur_, key, &raw.problem)) {
          raw.image.height = *v;
          has_h = true;
        }
      } else {
        cur_.Skip();
      }
    });
    raw.has_size = has_w && has_h;
    images_.push_back(std::move(raw));
  }

  void ReadCategory(size_t index) {
    const std::string item = "categories[" + std::to_string(index) + "]";
    if (cur_.Peek() != JsonCursor::Kind::kObject)
      Structural(item + " must be an object");
    CocoCategory cat;
    bool has_id = false;
    cur_.ForEachMember([&](std::string_view key) {
      if (key == "id") {
        if (cur_.Peek() != JsonCursor::Kind::kNumber)
          Structural(item + ": \"id\" must be a number");
        cat.id = cur_.Integer();
        has_id = true;
      } else if (key == "name" || key == "supercategory") {
        if (cur_.Peek() != JsonCursor::Kind::kString) {
          Structural(item + ": \"" + std::string(key) + "\" must be a string");
        }
        (key == "name" ? cat.name : cat.supercategory) = std::string(cur_.String(&scratch_));
      } else if (key == "keypoints") {
        if (cur_.Peek() != JsonCursor::Kind::kArray)
          Structural(item + ": \"keypoints\" must be a list of names");
        cur_.ForEachElement([&](size_t) {
          if (cur_.Peek() != JsonCursor::Kind::kString)
            Structural(item + ": \"keypoints\" must be a list of names");
          cat.keypoints.emplace_back(cur_.String(&scratch_));
        });
      } else if (key == "skeleton") {
        if (cur_.Peek() != JsonCursor::Kind::kArray)
          Structural(item + ": \"skeleton\" must be a list of [a, b] keypoint pairs (1-based)");
        cur_.ForEachElement([&](size_t) {
          std::array<int64_t, 2> pair{};
          size_t n = 0;
          if (cur_.Peek() != JsonCursor::Kind::kArray)
            Structural(item + ": \"skeleton\" must be a list of [a, b] keypoint pairs (1-based)");
          cur_.ForEachElement([&](size_t i) {
            if (cur_.Peek() != JsonCursor::Kind::kNumber)
              Structural(item + ": \"skeleton\" pairs must be numbers");
            const int64_t v = cur_.Integer();
            if (i < 2)
              pair[i] = v;
            ++n;
          });
          if (n != 2)
            Structural(item + ": a \"skeleton\" entry has " + std::to_string(n) +
                       " values, expected [a, b]");
          cat.skeleton.push_back(pair);
        });
      } else {
        cur_.Skip();
      }
    });
    if (!has_id)
      Structural(item + " has no \"id\"");
    if (cat.name.empty())
      cat.name = "class_" + std::to_string(cat.id);
    categories_.push_back(std::move(cat));
  }

  void ReadAnnotation(size_t index) {
    RawAnnotation raw;
    raw.index = index;
    if (cur_.Peek() != JsonCursor::Kind::kObject) {
      raw.problem = std::string("must be an object, found ") + JsonCursor::KindName(cur_.Peek());
      cur_.Skip();
      annotations_.push_back(std::move(raw));
      return;
    }
    CocoAnnotation& a = raw.ann;
    cur_.ForEachMember([&](std::string_view key) {
      if (key == "id") {
        if (auto v = ReadIntegerField(cur_, key, &raw.problem))
          a.id = *v;
      } else if (key == "image_id") {
        if (auto v = ReadIntegerField(cur_, key, &raw.problem)) {
          a.image_id = *v;
          raw.has_image = true;
        }
      } else if (key == "category_id") {
        if (auto v = ReadIntegerField(cur_, key, &raw.problem)) {
          a.category_id = *v;
          raw.has_category = true;
        }
      } else if (key == "bbox") {
        if (cur_.Peek() != JsonCursor::Kind::kArray) {
          if (raw.problem.empty())
            raw.problem = "\"bbox\" must be [x, y, w, h]";
          cur_.Skip();
          return;
        }
        size_t n = 0;
        cur_.ForEachElement([&](size_t i) {
          auto v = ReadNumberField(cur_, key, &raw.problem);
          if (v && i < 4)
            a.bbox[i] = *v;
          ++n;
        });
        if (n == 4) {
          raw.has_bbox = true;
        } else if (raw.problem.empty()) {
          raw.problem = "\"bbox\" has " + std::to_string(n) + " values, expected [x, y, w, h]";
        }
      } else if (key == "area") {
        if (auto v = ReadNumberField(cur_, key, &raw.problem)) {
          a.area = *v;
          raw.has_area = true;
        }
      } else if (key == "iscrowd") {
        auto k = cur_.Peek();
        if (k == JsonCursor::Kind::kTrue || k == JsonCursor::Kind::kFalse) {
          a.iscrowd = cur_.Bool();
        } else if (auto v = ReadNumberField(cur_, key, &raw.problem)) {
          a.iscrowd = *v != 0;
        }
      } else if (key == "segmentation" && opt_.load_segmentation) {
        a.segmentation = ReadSegmentationField(cur_, &raw.problem);
      } else if (key == "keypoints") {
        if (cur_.Peek() != JsonCursor::Kind::kArray) {
          if (raw.problem.empty())
            raw.problem = "\"keypoints\" must be [x1, y1, v1, x2, y2, v2, ...]";
          cur_.Skip();
          return;
        }
        cur_.ForEachElement([&](size_t) {
          if (auto v = ReadNumberField(cur_, key, &raw.problem))
            a.keypoints.push_back(static_cast<float>(*v));
        });
      } else if (key == "num_keypoints") {
        if (auto v = ReadIntegerField(cur_, key, &raw.problem))
          a.num_keypoints = *v;
      } else {
        cur_.Skip();
      }
    });
    annotations_.push_back(std::move(raw));
  }

  static std::string AnnotationName(const RawAnnotation& raw) {
    return "annotations[" + std::to_string(raw.index) + "] (id " + std::to_string(raw.ann.id) + ")";
  }

  // Training-view checks; returns the reason the annotation is bad, or "".
  std::string Validate(CocoAnnotation* a, const CocoImage& img, bool* clipped) {
    auto& b = a->bbox;
    for (double v : b) {
      if (!std::isfinite(v))
        return "\"bbox\" has a non-finite value";
    }
    if (b[2] <= 0 || b[3] <= 0) {
      return "zero-area box [" + std::to_string(b[0]) + ", " + std::to_string(b[1]) + ", " +
             std::to_string(b[2]) + ", " + std::to_string(b[3]) + "]";
    }
    const double W = static_cast<double>(img.width), H = static_cast<double>(img.height);
    double x0 = std::clamp(b[0], 0.0, W), y0 = std::clamp(b[1], 0.0, H);
    double x1 = std::clamp(b[0] + b[2], 0.0, W), y1 = std::clamp(b[1] + b[3], 0.0, H);
    if (x1 - x0 <= 0 || y1 - y0 <= 0) {
      return "box lies outside the " + std::to_string(img.width) + "x" +
             std::to_string(img.height) + " image";
    }
    *clipped = x0 != b[0] || y0 != b[1] || x1 != b[0] + b[2] || y1 != b[1] + b[3];
    b = {x0, y0, x1 - x0, y1 - y0};
    if (auto* polys = std::get_if<CocoPolygons>(&a->segmentation)) {
      for (const auto& p : *polys) {
        if (p.size() < 6 || p.size() % 2 != 0) {
          return "polygon with " + std::to_string(p.size()) +
                 " values (needs an even count of at least 6)";
        }
        for (double v : p) {
          if (!std::isfinite(v))
            return "polygon has a non-finite value";
        }
      }
    } else if (auto* rle = std::get_if<Rle>(&a->segmentation)) {
      if (rle->height != img.height || rle->width != img.width) {
        return "RLE size " + std::to_string(rle->height) + "x" + std::to_string(rle->width) +
               " differs from the image's " + std::to_string(img.height) + "x" +
               std::to_string(img.width);
      }
      uint64_t total = 0;
      for (uint32_t c : rle->counts)
        total += c;
      if (total != static_cast<uint64_t>(img.height * img.width)) {
        return "RLE counts cover " + std::to_string(total) + " pixels, the image has " +
               std::to_string(img.height * img.width);
      }
    }
    if (!a->keypoints.empty()) {
      if (a->keypoints.size() % 3 != 0) {
        return "\"keypoints\" has " + std::to_string(a->keypoints.size()) +
               " values, not x, y, v triples";
      }
      for (size_t k = 0; k < a->keypoints.size(); k += 3) {
        const float v = a->keypoints[k + 2];
        if (!std::isfinite(a->keypoints[k]) || !std::isfinite(a->keypoints[k + 1]))
          return "\"keypoints\" has a non-finite coordinate";
        if (v != 0.0f && v != 1.0f && v != 2.0f) {
          return "keypoint " + std::to_string(k / 3) + " has visibility " + std::to_string(v) +
                 " (COCO's are 0 unlabelled, 1 labelled hidden, 2 visible)";
        }
      }
      // Validate runs after Assemble moved the categories into ds_.
      const int64_t label = ds_.LabelOfCategory(a->category_id);
      const std::vector<std::string>* names =
          label > 0 ? &ds_.categories_[static_cast<size_t>(label - 1)].keypoints : nullptr;
      if (names != nullptr && !names->empty() && names->size() * 3 != a->keypoints.size()) {
        return "\"keypoints\" has " + std::to_string(a->keypoints.size() / 3) +
               " points, its category names " + std::to_string(names->size());
      }
    }
    if (!a->iscrowd && !(a->area > 0))
      a->area = b[2] * b[3];
    return "";
  }

  CocoDataset Assemble() {
    CocoDataset& ds = ds_;
    ds.source_ = source_;
    CocoLoadReport& rep = ds.report_;
    // Categories: sorted, unique; labels 1..K in id order.
    std::sort(categories_.begin(), categories_.end(),
              [](const auto& x, const auto& y) { return x.id < y.id; });
    for (size_t i = 1; i < categories_.size(); ++i) {
      if (categories_[i].id == categories_[i - 1].id) {
        Structural("category id " + std::to_string(categories_[i].id) + " appears twice");
      }
    }
    ds.categories_ = std::move(categories_);
    for (size_t i = 0; i < ds.categories_.size(); ++i) {
      ds.label_of_category_[ds.categories_[i].id] = static_cast<int64_t>(i + 1);
    }
    // Images.
    ds.images_.reserve(images_.size());
    for (auto& raw : images_) {
      const std::string item = "images[" + std::to_string(raw.index) + "]";
      std::string why = raw.problem;
      if (why.empty() && !raw.has_id)
        why = "has no \"id\"";
      if (why.empty() && opt_.validate_annotations) {
        if (!raw.has_size || raw.image.width <= 0 || raw.image.height <= 0) {
          why = "needs positive \"width\" and \"height\"";
        } else if (raw.image.file_name.empty()) {
          why = "has no \"file_name\"";
        }
      }
      if (why.empty() && ds.image_index_.count(raw.image.id)) {
        why = "duplicate image id " + std::to_string(raw.image.id);
      }
      if (!why.empty()) {
        ++rep.skipped_images;
        Bad(item + (raw.has_id ? " (id " + std::to_string(raw.image.id) + ")" : ""), why);
        continue;
      }
      ds.image_index_[raw.image.id] = static_cast<int64_t>(ds.images_.size());
      ds.images_.push_back(std::move(raw.image));
    }
    images_.clear();
    // Annotations: check, then group by image (counting sort keeps file order).
    std::vector<int64_t> image_of(annotations_.size(), -1);
    std::vector<size_t> per_image(ds.images_.size() + 1, 0);
    std::vector<size_t> positive(ds.images_.size(), 0);
    for (size_t i = 0; i < annotations_.size(); ++i) {
      RawAnnotation& raw = annotations_[i];
      CocoAnnotation& a = raw.ann;
      std::string why = raw.problem;
      auto img_it = ds.image_index_.find(a.image_id);
      if (why.empty() && !raw.has_image)
        why = "has no \"image_id\"";
      if (why.empty() && img_it == ds.image_index_.end()) {
        why = "image_id " + std::to_string(a.image_id) + " is not in \"images\"";
      }
      if (why.empty() && !raw.has_category)
        why = "has no \"category_id\"";
      if (const auto* polygons = std::get_if<CocoPolygons>(&a.segmentation);
          why.empty() && polygons != nullptr) {
        try {
          for (const auto& polygon : *polygons)
            CheckPolygonReach(polygon);
        } catch (const std::invalid_argument& e) {
          why = std::string("\"segmentation\" ") + e.what();
        }
      }
      a.label = ds.LabelOfCategory(a.category_id);
      if (why.empty() && a.label == 0 && opt_.validate_annotations) {
        why = "category_id " + std::to_string(a.category_id) + " is not in \"categories\"";
      }
      if (why.empty() && !raw.has_bbox && opt_.validate_annotations)
        why = "has no \"bbox\"";
      if (!raw.has_area && raw.has_bbox)
        a.area = a.bbox[2] * a.bbox[3];
      bool clipped = false;
      if (why.empty() && opt_.validate_annotations) {
        why = Validate(&a, ds.images_[static_cast<size_t>(img_it->second)], &clipped);
      }
      if (!why.empty()) {
        ++rep.skipped_annotations;
        Bad(AnnotationName(raw), why);
        continue;
      }
      if (clipped)
        ++rep.clipped_boxes;
      image_of[i] = img_it->second;
      ++per_image[static_cast<size_t>(img_it->second) + 1];
      if (!a.iscrowd)
        ++positive[static_cast<size_t>(img_it->second)];
    }
    for (size_t i = 1; i < per_image.size(); ++i)
      per_image[i] += per_image[i - 1];
    ds.annotations_.resize(per_image.back());
    std::vector<size_t> fill(per_image.begin(), per_image.end() - 1);
    for (size_t i = 0; i < annotations_.size(); ++i) {
      if (image_of[i] < 0)
        continue;
      ds.annotations_[fill[static_cast<size_t>(image_of[i])]++] = std::move(annotations_[i].ann);
    }
    annotations_.clear();
    ds.image_offsets_ = std::move(per_image);
    if (opt_.drop_images_without_annotations || opt_.min_keypoints_per_image > 0)
      DropEmptyImages(&ds, positive);
    return std::move(ds);
  }

  // Labelled keypoints (v > 0) of image i's annotations.
  static int64_t LabelledKeypoints(const CocoDataset& ds, size_t i) {
    int64_t count = 0;
    for (size_t k = ds.image_offsets_[i]; k < ds.image_offsets_[i + 1]; ++k) {
      const std::vector<float>& points = ds.annotations_[k].keypoints;
      for (size_t v = 2; v < points.size(); v += 3)
        count += points[v] > 0 ? 1 : 0;
    }
    return count;
  }

  void DropEmptyImages(CocoDataset* ds, const std::vector<size_t>& positive) {
    std::vector<CocoImage> images;
    std::vector<CocoAnnotation> anns;
    std::vector<size_t> offsets{0};
    ds->image_index_.clear();
    for (size_t i = 0; i < ds->images_.size(); ++i) {
      if (opt_.drop_images_without_annotations && positive[i] == 0) {
        ++ds->report_.dropped_empty_images;
        continue;
      }
      if (opt_.min_keypoints_per_image > 0 &&
          LabelledKeypoints(*ds, i) < opt_.min_keypoints_per_image) {
        ++ds->report_.dropped_few_keypoint_images;
        continue;
      }
      ds->image_index_[ds->images_[i].id] = static_cast<int64_t>(images.size());
      images.push_back(std::move(ds->images_[i]));
      for (size_t k = ds->image_offsets_[i]; k < ds->image_offsets_[i + 1]; ++k) {
        anns.push_back(std::move(ds->annotations_[k]));
      }
      offsets.push_back(anns.size());
    }
    ds->images_ = std::move(images);
    ds->annotations_ = std::move(anns);
    ds->image_offsets_ = std::move(offsets);
  }

  JsonCursor cur_;
  std::string source_;
  CocoLoadOptions opt_;
  std::string scratch_;
  std::vector<RawImage> images_;
  std::vector<RawAnnotation> annotations_;
  std::vector<CocoCategory> categories_;
  CocoDataset ds_;
};

CocoDataset CocoDataset::Load(const std::filesystem::path& json_path,
                              const CocoLoadOptions& options) {
  std::string text = ReadWholeFile(json_path, "the COCO annotation file");
  return Parse(text, json_path.string(), options);
}

CocoDataset CocoDataset::Parse(std::string_view json_text, const std::string& source,
                               const CocoLoadOptions& options) {
  CocoFileReader reader(json_text, source, options);
  return reader.Read();
}

std::span<const CocoAnnotation> CocoDataset::AnnotationsOfImage(size_t image_index) const {
  if (image_index >= images_.size()) {
    throw std::out_of_range("CocoDataset::AnnotationsOfImage: index " +
                            std::to_string(image_index) + " >= " + std::to_string(images_.size()));
  }
  return std::span<const CocoAnnotation>(
      annotations_.data() + image_offsets_[image_index],
      image_offsets_[image_index + 1] - image_offsets_[image_index]);
}

int64_t CocoDataset::ImageIndex(int64_t image_id) const {
  auto it = image_index_.find(image_id);
  return it == image_index_.end() ? -1 : it->second;
}

int64_t CocoDataset::LabelOfCategory(int64_t category_id) const {
  auto it = label_of_category_.find(category_id);
  return it == label_of_category_.end() ? 0 : it->second;
}

int64_t CocoDataset::CategoryOfLabel(int64_t label) const {
  if (label < 1 || label > NumClasses()) {
    throw std::out_of_range("label " + std::to_string(label) + " is outside 1.." +
                            std::to_string(NumClasses()) + " of " + source_);
  }
  return categories_[static_cast<size_t>(label - 1)].id;
}

std::vector<std::string> CocoDataset::ClassNames() const {
  std::vector<std::string> names;
  names.reserve(categories_.size());
  for (const auto& c : categories_)
    names.push_back(c.name);
  return names;
}

Rle AnnotationToRle(const CocoAnnotation& annotation, int64_t image_height, int64_t image_width) {
  if (const auto* polys = std::get_if<CocoPolygons>(&annotation.segmentation)) {
    if (!polys->empty())
      return RleFromPolygons(*polys, image_height, image_width);
  }
  if (const auto* rle = std::get_if<Rle>(&annotation.segmentation))
    return *rle;
  return Rle{image_height, image_width, {static_cast<uint32_t>(image_height * image_width)}};
}

}  // namespace mrcnn::data
