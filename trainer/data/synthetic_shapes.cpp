#include "trainer/data/synthetic_shapes.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <opencv2/imgproc.hpp>
#include <random>
#include <stdexcept>
#include <vector>

#include "trainer/data/image_encode.h"
#include "trainer/data/mask_rle.h"

namespace mrcnn::data {
namespace {

constexpr double kPi = 3.14159265358979323846;
const char* const kShapeNames[] = {"circle", "square", "triangle"};
const char* const kKeypointNames[] = {"left", "top", "right", "bottom"};

struct PlacedShape {
  int category = 0;                  // 1 circle, 2 square, 3 triangle
  std::vector<cv::Point2d> outline;  // polygon in pixels
  cv::Rect2d box;
  cv::Scalar colour;
};

std::vector<cv::Point2d> Outline(int category, double cx, double cy, double r, double angle) {
  std::vector<cv::Point2d> pts;
  const int n = category == 1 ? 32 : category == 2 ? 4 : 3;
  for (int i = 0; i < n; ++i) {
    const double a = angle + 2 * kPi * i / n;
    pts.emplace_back(cx + r * std::cos(a), cy + r * std::sin(a));
  }
  return pts;
}

cv::Rect2d BoundsOf(const std::vector<cv::Point2d>& pts) {
  double x0 = 1e9, y0 = 1e9, x1 = -1e9, y1 = -1e9;
  for (const auto& p : pts) {
    x0 = std::min(x0, p.x);
    y0 = std::min(y0, p.y);
    x1 = std::max(x1, p.x);
    y1 = std::max(y1, p.y);
  }
  return {x0, y0, x1 - x0, y1 - y0};
}

// The outline's extreme points in kKeypointNames' order. Vertices within half a pixel of the
// extreme (a square's side facing that way) give their middle, so the point does not jump
// between two corners as the shape turns through an axis.
std::array<cv::Point2d, 4> ExtremePoints(const std::vector<cv::Point2d>& outline) {
  std::array<cv::Point2d, 4> points;
  const std::array<std::function<double(const cv::Point2d&)>, 4> reach = {
      [](const cv::Point2d& p) { return -p.x; }, [](const cv::Point2d& p) { return -p.y; },
      [](const cv::Point2d& p) { return p.x; }, [](const cv::Point2d& p) { return p.y; }};
  for (size_t k = 0; k < 4; ++k) {
    double best = -1e18;
    for (const auto& p : outline)
      best = std::max(best, reach[k](p));
    cv::Point2d sum(0, 0);
    int n = 0;
    for (const auto& p : outline) {
      if (reach[k](p) >= best - 0.5) {
        sum += p;
        ++n;
      }
    }
    points[k] = sum / n;
  }
  return points;
}

// COCO keypoints of shape `k` (x, y as pixel indices, v), from its extreme points, held to
// the centres of the annotation box's outermost pixels (`bbox` [x, y, w, h]): an extreme
// vertex lies up to a pixel beyond the pixels the shape covers, and a point outside the box
// would be no training target.
nlohmann::json ShapeKeypoints(const PlacedShape& shape, const cv::Mat& owner, size_t k,
                              const std::array<double, 4>& bbox, int64_t* labelled) {
  nlohmann::json flat = nlohmann::json::array();
  for (const cv::Point2d& p : ExtremePoints(shape.outline)) {
    // The outline's coordinates put pixel centres at +0.5 (ToFixed); COCO's are indices.
    const double x = std::clamp(p.x - 0.5, bbox[0], bbox[0] + std::max(0.0, bbox[2] - 1));
    const double y = std::clamp(p.y - 0.5, bbox[1], bbox[1] + std::max(0.0, bbox[3] - 1));
    const int px = static_cast<int>(std::lround(x)), py = static_cast<int>(std::lround(y));
    bool inside = px >= 0 && py >= 0 && px < owner.cols && py < owner.rows;
    int v = 0;
    if (inside) {
      v = 1;
      for (int dy = -1; dy <= 1 && v == 1; ++dy) {
        for (int dx = -1; dx <= 1; ++dx) {
          const int qx = std::clamp(px + dx, 0, owner.cols - 1);
          const int qy = std::clamp(py + dy, 0, owner.rows - 1);
          if (owner.at<uint16_t>(qy, qx) == k + 1) {
            v = 2;
            break;
          }
        }
      }
    }
    if (v == 0) {
      flat.insert(flat.end(), {0, 0, 0});
    } else {
      flat.insert(flat.end(), {x, y, v});
      ++*labelled;
    }
  }
  return flat;
}

double BoxIou(const cv::Rect2d& a, const cv::Rect2d& b) {
  const double inter = (a & b).area();
  return inter / (a.area() + b.area() - inter);
}

// Fixed-point (4 fractional bits) so the drawn pixels follow the annotated polygon.
std::vector<cv::Point> ToFixed(const std::vector<cv::Point2d>& pts) {
  std::vector<cv::Point> out;
  for (const auto& p : pts) {
    out.emplace_back(static_cast<int>(std::lround((p.x - 0.5) * 16)),
                     static_cast<int>(std::lround((p.y - 0.5) * 16)));
  }
  return out;
}

cv::Scalar RandomColour(std::mt19937_64& rng, const cv::Scalar& background) {
  std::uniform_int_distribution<int> channel(0, 255);
  while (true) {
    cv::Scalar c(channel(rng), channel(rng), channel(rng));
    const double d = std::abs(c[0] - background[0]) + std::abs(c[1] - background[1]) +
                     std::abs(c[2] - background[2]);
    if (d > 200)
      return c;  // clearly distinct from the background
  }
}

// Shape k's visible region as polygons: its exact outline when no later shape overlaps
// its box, else the contours of `visible` (the pixels it still owns).
std::vector<std::vector<double>> VisiblePolygons(const std::vector<PlacedShape>& shapes, size_t k,
                                                 const cv::Mat& visible, int W, int H) {
  std::vector<std::vector<double>> polygons;
  bool occluded = false;
  for (size_t j = k + 1; j < shapes.size(); ++j) {
    occluded = occluded || (shapes[j].box & shapes[k].box).area() > 0;
  }
  if (!occluded) {
    std::vector<double> p;
    for (const auto& pt : shapes[k].outline) {
      p.push_back(std::clamp(pt.x, 0.0, static_cast<double>(W)));
      p.push_back(std::clamp(pt.y, 0.0, static_cast<double>(H)));
    }
    polygons.push_back(std::move(p));
  } else {
    std::vector<std::vector<cv::Point>> contours;
    cv::findContours(visible, contours, cv::RETR_EXTERNAL, cv::CHAIN_APPROX_SIMPLE);
    for (const auto& c : contours) {
      if (c.size() < 3)
        continue;
      std::vector<double> p;
      // Contours run through boundary pixel centres; +0.5 puts them on pixel corners
      // of the region's outer side well enough for training masks.
      for (const auto& pt : c) {
        p.push_back(pt.x + 0.5);
        p.push_back(pt.y + 0.5);
      }
      polygons.push_back(std::move(p));
    }
  }
  return polygons;
}

nlohmann::json MakeSplit(const ShapesOptions& opt, const std::string& split, int64_t count,
                         std::mt19937_64& rng, ShapesSummary* summary) {
  namespace fs = std::filesystem;
  const fs::path dir = opt.output / split;
  fs::create_directories(dir);
  const bool canvas = opt.canvas_width > 0;
  const int W = static_cast<int>(canvas ? opt.canvas_width : opt.image_size);
  const int H = static_cast<int>(canvas ? opt.canvas_height : opt.image_size);
  nlohmann::json images = nlohmann::json::array(), anns = nlohmann::json::array();
  int64_t ann_id = 1;
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (int64_t i = 0; i < count; ++i) {
    const int64_t image_id = i + 1;
    std::uniform_int_distribution<int> grey(20, 90);
    const cv::Scalar bg(grey(rng), grey(rng), grey(rng));
    cv::Mat img(H, W, CV_8UC3, bg);
    std::vector<PlacedShape> shapes;
    const int n = canvas ? static_cast<int>(opt.objects)
                         : 1 + static_cast<int>(rng() % static_cast<uint64_t>(
                                                            std::max<int64_t>(opt.max_objects, 1)));
    // 40 tries per image, as the demo's data always had; a canvas gets 40 per object.
    const int attempts = canvas ? 40 * n : 40;
    for (int attempt = 0; attempt < attempts && static_cast<int>(shapes.size()) < n; ++attempt) {
      PlacedShape s;
      s.category = 1 + static_cast<int>(rng() % 3);
      const double r =
          canvas
              ? (opt.object_min_size + (opt.object_max_size - opt.object_min_size) * unit(rng)) / 2
              : W * (0.08 + 0.14 * unit(rng));
      const double cx = r + (W - 2 * r) * unit(rng), cy = r + (H - 2 * r) * unit(rng);
      s.outline = Outline(s.category, cx, cy, r, 2 * kPi * unit(rng));
      s.box = BoundsOf(s.outline) & cv::Rect2d(0, 0, W, H);
      bool ok = true;
      for (const auto& o : shapes)
        ok = ok && BoxIou(o.box, s.box) < 0.25;
      if (!ok)
        continue;
      s.colour = RandomColour(rng, bg);
      shapes.push_back(std::move(s));
    }
    // Paint in order; later shapes occlude earlier ones. owner holds the top shape per pixel.
    cv::Mat owner(H, W, CV_16UC1, cv::Scalar(0));
    for (size_t k = 0; k < shapes.size(); ++k) {
      std::vector<std::vector<cv::Point>> poly{ToFixed(shapes[k].outline)};
      cv::fillPoly(img, poly, shapes[k].colour, cv::LINE_8, 4);
      cv::fillPoly(owner, poly, cv::Scalar(static_cast<double>(k + 1)), cv::LINE_8, 4);
    }
    // Mild zero-mean sensor noise (signed, then saturated back to 8 bits).
    cv::Mat noisy, noise(H, W, CV_16SC3);
    cv::randn(noise, cv::Scalar(0, 0, 0), cv::Scalar(6, 6, 6));
    img.convertTo(noisy, CV_16SC3);
    noisy += noise;
    noisy.convertTo(img, CV_8UC3);

    const std::string file_name =
        cv::format("%06lld.%s", static_cast<long long>(image_id), opt.format.c_str());
    // The canvas is painted as BGR (what cv::imwrite took before); the files keep the
    // pixels they had then.
    cv::Mat rgb;
    cv::cvtColor(img, rgb, cv::COLOR_BGR2RGB);
    WriteImageFile(dir / file_name, rgb);
    images.push_back({{"id", image_id}, {"file_name", file_name}, {"width", W}, {"height", H}});
    for (size_t k = 0; k < shapes.size(); ++k) {
      cv::Mat visible = owner == static_cast<double>(k + 1);
      const int full = cv::countNonZero(visible);
      if (full < 16)
        continue;
      const auto polygons = VisiblePolygons(shapes, k, visible, W, H);
      if (polygons.empty())
        continue;
      Rle rle = RleFromPolygons(polygons, H, W);
      const auto area = RleArea(rle);
      if (area < 16)
        continue;
      const auto bbox = RleToBbox(rle);
      anns.push_back({{"id", ann_id++},
                      {"image_id", image_id},
                      {"category_id", shapes[k].category},
                      {"bbox", bbox},
                      {"area", area},
                      {"iscrowd", 0},
                      {"segmentation", polygons}});
      if (opt.keypoints) {
        int64_t labelled = 0;
        anns.back()["keypoints"] = ShapeKeypoints(shapes[k], owner, k, bbox, &labelled);
        anns.back()["num_keypoints"] = labelled;
      }
      ++summary->annotations;
    }
    ++summary->images;
  }
  nlohmann::json cats = nlohmann::json::array();
  for (int c = 0; c < 3; ++c) {
    cats.push_back({{"id", c + 1}, {"name", kShapeNames[c]}, {"supercategory", "shape"}});
    if (opt.keypoints) {
      cats.back()["keypoints"] = kKeypointNames;
      cats.back()["skeleton"] = {{1, 2}, {2, 3}, {3, 4}, {4, 1}};
    }
  }
  return {{"info", {{"description", "synthetic shapes (trainer make-shapes)"}, {"seed", opt.seed}}},
          {"images", images},
          {"annotations", anns},
          {"categories", cats}};
}

}  // namespace

ShapesSummary WriteShapesDataset(const ShapesOptions& opt) {
  if (opt.canvas_width > 0 || opt.canvas_height > 0) {
    if (opt.canvas_width < 32 || opt.canvas_width > 16384 || opt.canvas_height < 32 ||
        opt.canvas_height > 16384) {
      throw std::invalid_argument(
          "make-shapes: --canvas sides must be within 32..16384 pixels (e.g. 4000x3000)");
    }
    if (opt.objects < 1) {
      throw std::invalid_argument("make-shapes: --objects must be at least 1");
    }
    if (!(opt.object_min_size >= 4 && opt.object_min_size <= opt.object_max_size &&
          opt.object_max_size <=
              static_cast<double>(std::min(opt.canvas_width, opt.canvas_height)) / 2)) {
      throw std::invalid_argument(
          "make-shapes: --object-size MIN-MAX needs 4 <= MIN <= MAX <= half the canvas's shorter "
          "side");
    }
  } else if (opt.image_size < 32 || opt.image_size > 4096) {
    throw std::invalid_argument("make-shapes: --size must be within 32..4096 pixels");
  }
  if (opt.format != "png" && opt.format != "jpg") {
    throw std::invalid_argument("make-shapes: --format must be png or jpg");
  }
  if (opt.train_images < 0 || opt.val_images < 0) {
    throw std::invalid_argument("make-shapes: --train and --val must be >= 0");
  }
  namespace fs = std::filesystem;
  fs::create_directories(opt.output / "annotations");
  ShapesSummary summary;
  // Separate streams so the validation split does not change with --train.
  std::mt19937_64 train_rng(opt.seed * 2 + 1), val_rng(opt.seed * 2 + 2);
  const std::pair<const char*, int64_t> splits[] = {{"train", opt.train_images},
                                                    {"val", opt.val_images}};
  for (const auto& [split, count] : splits) {
    auto& rng = std::string(split) == "train" ? train_rng : val_rng;
    nlohmann::json j = MakeSplit(opt, split, count, rng, &summary);
    const fs::path path =
        opt.output / "annotations" / (std::string("instances_") + split + ".json");
    std::ofstream out(path);
    out << j.dump();
    if (!out)
      throw std::runtime_error(path.string() + ": cannot write the annotation file");
  }
  return summary;
}

}  // namespace mrcnn::data
