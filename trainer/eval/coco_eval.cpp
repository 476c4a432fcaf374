#include "trainer/eval/coco_eval.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <thread>
#include <unordered_map>

#include "trainer/data/coco_json_fields.h"
#include "trainer/data/json_cursor.h"
#include "trainer/data/whole_file.h"

namespace mrcnn::eval {

using data::CocoAnnotation;
using data::CocoDataset;
using data::Rle;

const std::array<const char*, 12> CocoEvalResult::kStatNames = {
    "AP", "AP50", "AP75", "APs", "APm", "APl", "AR1", "AR10", "AR100", "ARs", "ARm", "ARl"};
const std::array<const char*, 10> CocoEvalResult::kKeypointStatNames = {
    "AP", "AP50", "AP75", "APm", "APl", "AR", "AR50", "AR75", "ARm", "ARl"};

IouType ParseIouType(std::string_view text) {
  if (text == "bbox")
    return IouType::kBbox;
  if (text == "segm")
    return IouType::kSegm;
  if (text == "keypoints")
    return IouType::kKeypoints;
  throw std::invalid_argument("iou type '" + std::string(text) +
                              "' is not 'bbox', 'segm' or 'keypoints'");
}

const char* IouTypeName(IouType type) {
  return type == IouType::kBbox ? "bbox" : type == IouType::kSegm ? "segm" : "keypoints";
}

const std::vector<double>& CocoPersonOksSigmas() {
  static const std::vector<double> sigmas = {.26, .25, .25, .35, .35, .79, .79, .72, .72,
                                             .62, .62, 1.07, 1.07, .87, .87, .89, .89};
  static const std::vector<double> scaled = [] {
    std::vector<double> s;
    for (double v : sigmas)
      s.push_back(v / 10.0);
    return s;
  }();
  return scaled;
}

CocoEvalParams CocoEvalParams::ForKeypoints(std::vector<double> sigmas) {
  CocoEvalParams p;
  p.max_dets = {20};
  p.area_ranges = {{0, 1e10}, {32 * 32, 96 * 96}, {96 * 96, 1e10}};
  p.area_labels = {"all", "medium", "large"};
  p.kpt_oks_sigmas = std::move(sigmas);
  return p;
}

CocoEvalParams::CocoEvalParams() {
  // Same arithmetic as numpy.linspace (start + i*step, last value set to stop), so the
  // thresholds are bit-identical to pycocotools' Params.
  const double iou_step = (0.95 - 0.5) / 9.0;
  for (int i = 0; i < 10; ++i)
    iou_thresholds.push_back(i * iou_step + 0.5);
  iou_thresholds.back() = 0.95;
  const double rec_step = 1.0 / 100.0;
  for (int i = 0; i <= 100; ++i)
    recall_thresholds.push_back(i * rec_step + 0.0);
  recall_thresholds.back() = 1.0;
  area_ranges = {{0, 1e10}, {0, 32 * 32}, {32 * 32, 96 * 96}, {96 * 96, 1e10}};
  area_labels = {"all", "small", "medium", "large"};
}

data::CocoLoadOptions GroundTruthLoadOptions() {
  data::CocoLoadOptions o;
  o.validate_annotations = false;
  o.drop_images_without_annotations = false;
  return o;
}

std::vector<Detection> ParseResults(std::string_view json_text, const std::string& source,
                                    const CocoDataset& gt) {
  data::JsonCursor cur(json_text, source);
  if (cur.Peek() != data::JsonCursor::Kind::kArray) {
    cur.Fail(
        "a COCO results file must be an array of {image_id, category_id, score, bbox "
        "and/or segmentation}");
  }
  std::vector<Detection> dets;
  cur.ForEachElement([&](size_t index) {
    const size_t start = cur.offset();
    std::string problem;
    Detection d;
    bool has_image = false, has_cat = false, has_score = false;
    if (cur.Peek() != data::JsonCursor::Kind::kObject) {
      problem = "must be an object";
      cur.Skip();
    } else {
      cur.ForEachMember([&](std::string_view key) {
        if (key == "image_id") {
          if (auto v = data::ReadIntegerField(cur, key, &problem)) {
            d.image_id = *v;
            has_image = true;
          }
        } else if (key == "category_id") {
          if (auto v = data::ReadIntegerField(cur, key, &problem)) {
            d.category_id = *v;
            has_cat = true;
          }
        } else if (key == "score") {
          if (auto v = data::ReadNumberField(cur, key, &problem)) {
            d.score = *v;
            has_score = true;
          }
        } else if (key == "bbox") {
          if (cur.Peek() != data::JsonCursor::Kind::kArray) {
            if (problem.empty())
              problem = "\"bbox\" must be [x, y, w, h]";
            cur.Skip();
            return;
          }
          std::array<double, 4> b{};
          size_t n = 0;
          cur.ForEachElement([&](size_t i) {
            auto v = data::ReadNumberField(cur, key, &problem);
            if (v && i < 4)
              b[i] = *v;
            ++n;
          });
          if (n == 4) {
            d.bbox = b;
          } else if (n != 0 && problem.empty()) {
            problem = "\"bbox\" must have 4 values [x, y, w, h]";
          }
        } else if (key == "segmentation") {
          d.segmentation = data::ReadSegmentationField(cur, &problem);
        } else if (key == "keypoints") {
          if (cur.Peek() != data::JsonCursor::Kind::kArray) {
            if (problem.empty())
              problem = "\"keypoints\" must be [x1, y1, s1, x2, y2, s2, ...]";
            cur.Skip();
            return;
          }
          cur.ForEachElement([&](size_t) {
            if (auto v = data::ReadNumberField(cur, key, &problem))
              d.keypoints.push_back(*v);
          });
          if (problem.empty() && (d.keypoints.empty() || d.keypoints.size() % 3 != 0)) {
            problem = "\"keypoints\" has " + std::to_string(d.keypoints.size()) +
                      " values, not x, y, score triples";
          }
        } else {
          cur.Skip();
        }
      });
    }
    if (problem.empty() && !has_image)
      problem = "has no \"image_id\"";
    if (problem.empty() && !has_cat)
      problem = "has no \"category_id\"";
    if (problem.empty() && !has_score)
      problem = "has no \"score\"";
    if (problem.empty() && gt.ImageIndex(d.image_id) < 0) {
      problem = "image_id " + std::to_string(d.image_id) + " is not in the ground truth " +
                gt.source() + " (results must be for the annotated images)";
    }
    if (!problem.empty()) {
      throw std::runtime_error(cur.Where(start) + ": results[" + std::to_string(index) +
                               "]: " + problem);
    }
    dets.push_back(std::move(d));
  });
  cur.ExpectEnd();
  return dets;
}

std::vector<Detection> LoadResults(const std::filesystem::path& path, const CocoDataset& gt) {
  std::string text = data::ReadWholeFile(path, "the COCO results file");
  return ParseResults(text, path.string(), gt);
}

namespace {

// A detection after COCO.loadRes: id, area and box fixed; mask made on demand.
struct PreparedDet {
  int64_t id = 0;
  double score = 0;
  double area = 0;
  std::array<double, 4> bbox{};
  const Detection* source = nullptr;
  bool box_as_polygon = false;  // segm of a box-only result
};

// One evaluated detection of one image, for accumulate(): flags per IoU threshold.
struct DetRecord {
  double score;
  int32_t rank;      // position among the image's detections (score order)
  uint64_t tp_bits;  // matched and not ignored
  uint64_t fp_bits;  // unmatched and not ignored
};

struct ImageRefs {
  std::vector<std::pair<int64_t, size_t>> gt;  // (sorted image index, annotation index)
  std::vector<std::pair<int64_t, size_t>> dt;  // (sorted image index, prepared det index)
};

class Evaluator {
 public:
  Evaluator(const CocoDataset& gt, const std::vector<Detection>& dets, IouType type,
            const CocoEvalParams& params)
      : gt_(gt), dets_(dets), type_(type), p_(params) {
    if (p_.iou_thresholds.empty() || p_.iou_thresholds.size() > 64) {
      throw std::invalid_argument("CocoEvalParams: 1 to 64 IoU thresholds are supported");
    }
    if (p_.area_ranges.size() != p_.area_labels.size() || p_.area_ranges.empty()) {
      throw std::invalid_argument("CocoEvalParams: area_ranges and area_labels must match");
    }
    std::sort(p_.max_dets.begin(), p_.max_dets.end());
    if (p_.max_dets.empty())
      throw std::invalid_argument("CocoEvalParams: max_dets is empty");
    T_ = p_.iou_thresholds.size();
    R_ = p_.recall_thresholds.size();
    K_ = gt_.categories().size();
    A_ = p_.area_ranges.size();
    M_ = p_.max_dets.size();
  }

  CocoEvalResult Run() {
    PrepareDetections();
    GroupByCategory();
    precision_.assign(T_ * R_ * K_ * A_ * M_, -1.0);
    recall_.assign(T_ * K_ * A_ * M_, -1.0);
    int threads =
        p_.num_threads > 0 ? p_.num_threads : static_cast<int>(std::thread::hardware_concurrency());
    threads = std::max(1, std::min<int>(threads, static_cast<int>(std::max<size_t>(K_, 1))));
    std::atomic<size_t> next{0};
    std::vector<std::exception_ptr> errors(static_cast<size_t>(threads));
    auto work = [&](int w) {
      try {
        for (size_t k = next++; k < K_; k = next++)
          EvaluateCategory(k);
      } catch (...) {
        errors[static_cast<size_t>(w)] = std::current_exception();
      }
    };
    std::vector<std::thread> pool;
    for (int w = 1; w < threads; ++w)
      pool.emplace_back(work, w);
    work(0);
    for (auto& t : pool)
      t.join();
    for (auto& e : errors) {
      if (e)
        std::rethrow_exception(e);
    }
    return Summarize();
  }

 private:
  void PrepareDetections() {
    prepared_.resize(dets_.size());
    // COCO.loadRes decides from the first result whether areas come from boxes.
    const bool box_mode = !dets_.empty() && dets_[0].bbox.has_value();
    const bool keypoint_mode = !box_mode && !dets_.empty() &&
                               std::holds_alternative<std::monostate>(dets_[0].segmentation) &&
                               !dets_[0].keypoints.empty();
    for (size_t i = 0; i < dets_.size(); ++i) {
      const Detection& d = dets_[i];
      PreparedDet& pd = prepared_[i];
      pd.id = static_cast<int64_t>(i) + 1;
      pd.score = d.score;
      pd.source = &d;
      const int64_t img = gt_.ImageIndex(d.image_id);
      if (img < 0) {
        throw std::invalid_argument("detection " + std::to_string(i) + ": image_id " +
                                    std::to_string(d.image_id) + " is not in the ground truth " +
                                    gt_.source());
      }
      if (box_mode) {
        if (!d.bbox) {
          throw std::invalid_argument("detection " + std::to_string(i) +
                                      " has no bbox while the first one has (COCO results must "
                                      "be uniform)");
        }
        pd.bbox = *d.bbox;
        pd.area = pd.bbox[2] * pd.bbox[3];
        pd.box_as_polygon = std::holds_alternative<std::monostate>(d.segmentation);
      } else if (keypoint_mode) {
        // COCO.loadRes's keypoints branch: box and area from the points' extent.
        if (d.keypoints.empty()) {
          throw std::invalid_argument("detection " + std::to_string(i) +
                                      " has no keypoints while the first one has (COCO results "
                                      "must be uniform)");
        }
        double x0 = 1e300, y0 = 1e300, x1 = -1e300, y1 = -1e300;
        for (size_t k = 0; k + 2 < d.keypoints.size(); k += 3) {
          x0 = std::min(x0, d.keypoints[k]);
          x1 = std::max(x1, d.keypoints[k]);
          y0 = std::min(y0, d.keypoints[k + 1]);
          y1 = std::max(y1, d.keypoints[k + 1]);
        }
        pd.bbox = {x0, y0, x1 - x0, y1 - y0};
        pd.area = (x1 - x0) * (y1 - y0);
      } else {
        if (std::holds_alternative<std::monostate>(d.segmentation)) {
          throw std::invalid_argument("detection " + std::to_string(i) +
                                      " has neither a bbox nor a segmentation");
        }
        const auto& im = gt_.images()[static_cast<size_t>(img)];
        Rle rle = DetectionRle(pd, im.height, im.width);
        pd.area = static_cast<double>(data::RleArea(rle));
        pd.bbox = d.bbox ? *d.bbox : data::RleToBbox(rle);
      }
    }
  }

  Rle DetectionRle(const PreparedDet& pd, int64_t h, int64_t w) const {
    if (pd.box_as_polygon) {
      const auto& b = pd.bbox;
      const double x1 = b[0], x2 = b[0] + b[2], y1 = b[1], y2 = b[1] + b[3];
      return data::RleFromPolygons({{x1, y1, x1, y2, x2, y2, x2, y1}}, h, w);
    }
    data::CocoAnnotation a;
    a.segmentation = pd.source->segmentation;
    return data::AnnotationToRle(a, h, w);
  }

  void GroupByCategory() {
    // Images in ascending id order, as pycocotools sorts Params.imgIds.
    const auto& images = gt_.images();
    sorted_images_.resize(images.size());
    std::iota(sorted_images_.begin(), sorted_images_.end(), size_t{0});
    std::sort(sorted_images_.begin(), sorted_images_.end(),
              [&](size_t a, size_t b) { return images[a].id < images[b].id; });
    std::vector<int64_t> rank_of_image(images.size());
    for (size_t r = 0; r < sorted_images_.size(); ++r) {
      rank_of_image[sorted_images_[r]] = static_cast<int64_t>(r);
    }
    std::unordered_map<int64_t, size_t> k_of_cat;
    for (size_t k = 0; k < K_; ++k)
      k_of_cat[gt_.categories()[k].id] = k;
    refs_.assign(K_, {});
    for (size_t r = 0; r < sorted_images_.size(); ++r) {
      auto anns = gt_.AnnotationsOfImage(sorted_images_[r]);
      const size_t base = static_cast<size_t>(anns.data() - gt_.annotations().data());
      for (size_t j = 0; j < anns.size(); ++j) {
        auto it = k_of_cat.find(anns[j].category_id);
        if (it != k_of_cat.end())
          refs_[it->second].gt.push_back({static_cast<int64_t>(r), base + j});
      }
    }
    for (size_t i = 0; i < dets_.size(); ++i) {
      auto it = k_of_cat.find(dets_[i].category_id);
      if (it == k_of_cat.end())
        continue;
      const int64_t r = rank_of_image[static_cast<size_t>(gt_.ImageIndex(dets_[i].image_id))];
      refs_[it->second].dt.push_back({r, i});
    }
    for (auto& ref : refs_) {
      std::stable_sort(ref.dt.begin(), ref.dt.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
    }
  }

  void EvaluateCategory(size_t k) {
    const ImageRefs& ref = refs_[k];
    std::vector<std::vector<DetRecord>> records(A_);
    std::vector<int64_t> npig(A_, 0);
    size_t gi = 0, di = 0;
    std::vector<size_t> g_idx, d_idx;
    while (gi < ref.gt.size() || di < ref.dt.size()) {
      int64_t img = std::numeric_limits<int64_t>::max();
      if (gi < ref.gt.size())
        img = ref.gt[gi].first;
      if (di < ref.dt.size())
        img = std::min(img, ref.dt[di].first);
      g_idx.clear();
      d_idx.clear();
      while (gi < ref.gt.size() && ref.gt[gi].first == img)
        g_idx.push_back(ref.gt[gi++].second);
      while (di < ref.dt.size() && ref.dt[di].first == img)
        d_idx.push_back(ref.dt[di++].second);
      EvaluateImage(sorted_images_[static_cast<size_t>(img)], g_idx, d_idx, &records, &npig);
    }
    Accumulate(k, records, npig);
  }

  void EvaluateImage(size_t image_index, const std::vector<size_t>& g_idx,
                     std::vector<size_t> d_idx, std::vector<std::vector<DetRecord>>* records,
                     std::vector<int64_t>* npig) const {
    const auto& anns = gt_.annotations();
    // Detections by descending score (stable), at most maxDets[-1].
    std::stable_sort(d_idx.begin(), d_idx.end(),
                     [&](size_t a, size_t b) { return prepared_[a].score > prepared_[b].score; });
    const size_t max_det = static_cast<size_t>(std::max<int64_t>(p_.max_dets.back(), 0));
    if (d_idx.size() > max_det)
      d_idx.resize(max_det);
    const size_t G = g_idx.size(), D = d_idx.size();
    std::vector<bool> crowd(G);
    for (size_t g = 0; g < G; ++g)
      crowd[g] = anns[g_idx[g]].iscrowd;
    std::vector<double> ious;
    if (G > 0 && D > 0) {
      if (type_ == IouType::kBbox) {
        std::vector<std::array<double, 4>> db(D), gb(G);
        for (size_t d = 0; d < D; ++d)
          db[d] = prepared_[d_idx[d]].bbox;
        for (size_t g = 0; g < G; ++g)
          gb[g] = anns[g_idx[g]].bbox;
        ious = data::BoxIou(db, gb, crowd);
      } else if (type_ == IouType::kKeypoints) {
        ious = Oks(g_idx, d_idx);
      } else {
        const auto& im = gt_.images()[image_index];
        std::vector<Rle> dr(D), gr(G);
        for (size_t d = 0; d < D; ++d)
          dr[d] = DetectionRle(prepared_[d_idx[d]], im.height, im.width);
        for (size_t g = 0; g < G; ++g)
          gr[g] = data::AnnotationToRle(anns[g_idx[g]], im.height, im.width);
        ious = data::RleIou(dr, gr, crowd);
      }
    }
    std::vector<size_t> order(G);
    std::vector<uint8_t> gt_ignore(G);
    std::vector<int64_t> gt_matched_by(G);  // per threshold, reset below
    std::vector<int64_t> dt_match(D);
    std::vector<uint8_t> dt_ignore(D);
    for (size_t a = 0; a < A_; ++a) {
      const double lo = p_.area_ranges[a][0], hi = p_.area_ranges[a][1];
      std::vector<uint8_t> ignore_unsorted(G);
      for (size_t g = 0; g < G; ++g) {
        const double area = anns[g_idx[g]].area;
        // Keypoints: ground truth without labelled keypoints is ignored (_prepare).
        const bool no_keypoints =
            type_ == IouType::kKeypoints && anns[g_idx[g]].num_keypoints == 0;
        ignore_unsorted[g] = crowd[g] || no_keypoints || area < lo || area > hi;
      }
      // Non-ignored ground truth first (stable), as evaluateImg sorts it.
      std::iota(order.begin(), order.end(), size_t{0});
      std::stable_sort(order.begin(), order.end(),
                       [&](size_t x, size_t y) { return ignore_unsorted[x] < ignore_unsorted[y]; });
      for (size_t s = 0; s < G; ++s)
        gt_ignore[s] = ignore_unsorted[order[s]];
      for (size_t s = 0; s < G; ++s)
        (*npig)[a] += gt_ignore[s] == 0;
      std::vector<uint64_t> tp(D, 0), fp(D, 0);
      for (size_t t = 0; t < T_; ++t) {
        std::fill(gt_matched_by.begin(), gt_matched_by.end(), 0);
        std::fill(dt_match.begin(), dt_match.end(), 0);
        std::fill(dt_ignore.begin(), dt_ignore.end(), 0);
        if (!ious.empty()) {
          for (size_t d = 0; d < D; ++d) {
            double best = std::min(p_.iou_thresholds[t], 1 - 1e-10);
            int64_t m = -1;
            for (size_t s = 0; s < G; ++s) {
              const size_t g = order[s];
              if (gt_matched_by[s] > 0 && !crowd[g])
                continue;
              if (m > -1 && gt_ignore[static_cast<size_t>(m)] == 0 && gt_ignore[s] == 1)
                break;
              const double iou = ious[d * G + g];
              if (iou < best)
                continue;
              best = iou;
              m = static_cast<int64_t>(s);
            }
            if (m == -1)
              continue;
            const size_t ms = static_cast<size_t>(m);
            dt_ignore[d] = gt_ignore[ms];
            dt_match[d] = anns[g_idx[order[ms]]].id;
            gt_matched_by[ms] = prepared_[d_idx[d]].id;
          }
        }
        for (size_t d = 0; d < D; ++d) {
          const double area = prepared_[d_idx[d]].area;
          // An unmatched detection outside the area range is ignored too.
          const bool ig = dt_ignore[d] || (dt_match[d] == 0 && (area < lo || area > hi));
          if (ig)
            continue;
          if (dt_match[d] != 0) {
            tp[d] |= uint64_t{1} << t;
          } else {
            fp[d] |= uint64_t{1} << t;
          }
        }
      }
      auto& out = (*records)[a];
      for (size_t d = 0; d < D; ++d) {
        out.push_back({prepared_[d_idx[d]].score, static_cast<int32_t>(d), tp[d], fp[d]});
      }
    }
  }

  // pycocotools' computeOks: D x G, row-major (detection d, ground truth g) like the IoUs.
  // With labelled ground-truth keypoints, the mean over them of exp(-d^2 / (2 s^2 (2 sigma)^2))
  // with s^2 the annotation's area; without, the distances to the box grown by its size on
  // every side, over all keypoints.
  std::vector<double> Oks(const std::vector<size_t>& g_idx, const std::vector<size_t>& d_idx) const {
    const auto& anns = gt_.annotations();
    const std::vector<double>& sigmas =
        p_.kpt_oks_sigmas.empty() ? CocoPersonOksSigmas() : p_.kpt_oks_sigmas;
    const size_t K = sigmas.size(), G = g_idx.size(), D = d_idx.size();
    std::vector<double> vars(K);
    for (size_t k = 0; k < K; ++k)
      vars[k] = (sigmas[k] * 2) * (sigmas[k] * 2);
    std::vector<double> out(D * G, 0.0), e(K);
    for (size_t g = 0; g < G; ++g) {
      const data::CocoAnnotation& gt = anns[g_idx[g]];
      if (gt.keypoints.size() != 3 * K) {
        throw std::invalid_argument(
            "keypoint evaluation: annotation " + std::to_string(gt.id) + " has " +
            std::to_string(gt.keypoints.size() / 3) + " keypoints for " + std::to_string(K) +
            " OKS sigmas (give one sigma per keypoint: --oks-sigmas, TEST.KEYPOINT_OKS_SIGMAS)");
      }
      size_t labelled = 0;
      for (size_t k = 0; k < K; ++k)
        labelled += gt.keypoints[3 * k + 2] > 0 ? 1 : 0;
      const auto& bb = gt.bbox;
      const double x0 = bb[0] - bb[2], x1 = bb[0] + bb[2] * 2;
      const double y0 = bb[1] - bb[3], y1 = bb[1] + bb[3] * 2;
      for (size_t d = 0; d < D; ++d) {
        const std::vector<double>& dt = prepared_[d_idx[d]].source->keypoints;
        if (dt.size() != 3 * K) {
          throw std::invalid_argument("keypoint evaluation: result " +
                                      std::to_string(prepared_[d_idx[d]].id - 1) + " has " +
                                      std::to_string(dt.size() / 3) + " keypoints for " +
                                      std::to_string(K) + " OKS sigmas");
        }
        double sum = 0;
        size_t count = 0;
        for (size_t k = 0; k < K; ++k) {
          const double xd = dt[3 * k], yd = dt[3 * k + 1];
          double dx, dy;
          if (labelled > 0) {
            if (!(gt.keypoints[3 * k + 2] > 0))
              continue;
            dx = xd - gt.keypoints[3 * k];
            dy = yd - gt.keypoints[3 * k + 1];
          } else {
            dx = std::max(0.0, x0 - xd) + std::max(0.0, xd - x1);
            dy = std::max(0.0, y0 - yd) + std::max(0.0, yd - y1);
          }
          const double err = (dx * dx + dy * dy) / vars[k] /
                             (gt.area + std::numeric_limits<double>::epsilon()) / 2;
          sum += std::exp(-err);
          ++count;
        }
        out[d * G + g] = sum / static_cast<double>(count);
      }
    }
    return out;
  }

  void Accumulate(size_t k, const std::vector<std::vector<DetRecord>>& records,
                  const std::vector<int64_t>& npig) {
    std::vector<const DetRecord*> sel;
    std::vector<double> rc, pr;
    for (size_t a = 0; a < A_; ++a) {
      if (npig[a] == 0)
        continue;
      for (size_t m = 0; m < M_; ++m) {
        const int64_t max_det = p_.max_dets[m];
        sel.clear();
        for (const auto& r : records[a]) {
          if (r.rank < max_det)
            sel.push_back(&r);
        }
        std::stable_sort(sel.begin(), sel.end(), [](const DetRecord* x, const DetRecord* y) {
          return x->score > y->score;
        });
        const size_t nd = sel.size();
        for (size_t t = 0; t < T_; ++t) {
          rc.resize(nd);
          pr.resize(nd);
          double tp = 0, fp = 0;
          const uint64_t bit = uint64_t{1} << t;
          for (size_t i = 0; i < nd; ++i) {
            tp += (sel[i]->tp_bits & bit) ? 1 : 0;
            fp += (sel[i]->fp_bits & bit) ? 1 : 0;
            rc[i] = tp / static_cast<double>(npig[a]);
            pr[i] = tp / (fp + tp + std::numeric_limits<double>::epsilon());
          }
          recall_[((t * K_ + k) * A_ + a) * M_ + m] = nd ? rc[nd - 1] : 0;
          for (size_t i = nd; i-- > 1;) {
            if (pr[i] > pr[i - 1])
              pr[i - 1] = pr[i];
          }
          for (size_t r = 0; r < R_; ++r) {
            const auto it = std::lower_bound(rc.begin(), rc.end(), p_.recall_thresholds[r]);
            const double q = it == rc.end() ? 0.0 : pr[static_cast<size_t>(it - rc.begin())];
            precision_[(((t * R_ + r) * K_ + k) * A_ + a) * M_ + m] = q;
          }
        }
      }
    }
  }

  double MeanAp(std::optional<double> iou, size_t a, size_t m, std::optional<size_t> k) const {
    double sum = 0;
    size_t n = 0;
    for (size_t t = 0; t < T_; ++t) {
      if (iou && p_.iou_thresholds[t] != *iou)
        continue;
      for (size_t r = 0; r < R_; ++r) {
        for (size_t kk = 0; kk < K_; ++kk) {
          if (k && kk != *k)
            continue;
          const double v = precision_[(((t * R_ + r) * K_ + kk) * A_ + a) * M_ + m];
          if (v > -1) {
            sum += v;
            ++n;
          }
        }
      }
    }
    return n ? sum / static_cast<double>(n) : -1;
  }

  double MeanAr(size_t a, size_t m, std::optional<double> iou = {}) const {
    double sum = 0;
    size_t n = 0;
    for (size_t t = 0; t < T_; ++t) {
      if (iou && p_.iou_thresholds[t] != *iou)
        continue;
      for (size_t kk = 0; kk < K_; ++kk) {
        const double v = recall_[((t * K_ + kk) * A_ + a) * M_ + m];
        if (v > -1) {
          sum += v;
          ++n;
        }
      }
    }
    return n ? sum / static_cast<double>(n) : -1;
  }

  size_t AreaIndex(const char* label) const {
    for (size_t a = 0; a < A_; ++a) {
      if (p_.area_labels[a] == label)
        return a;
    }
    throw std::invalid_argument(std::string("CocoEvalParams: no area range labelled ") + label);
  }

  CocoEvalResult Summarize() const {
    if (type_ == IouType::kKeypoints)
      return SummarizeKeypoints();
    CocoEvalResult res;
    const size_t all = AreaIndex("all"), s = AreaIndex("small"), md = AreaIndex("medium"),
                 l = AreaIndex("large");
    const size_t m_last = std::min<size_t>(2, M_ - 1);
    res.stats = {MeanAp({}, all, m_last, {}),
                 MeanAp(0.5, all, m_last, {}),
                 MeanAp(0.75, all, m_last, {}),
                 MeanAp({}, s, m_last, {}),
                 MeanAp({}, md, m_last, {}),
                 MeanAp({}, l, m_last, {}),
                 MeanAr(all, 0),
                 MeanAr(all, std::min<size_t>(1, M_ - 1)),
                 MeanAr(all, m_last),
                 MeanAr(s, m_last),
                 MeanAr(md, m_last),
                 MeanAr(l, m_last)};
    for (size_t k = 0; k < K_; ++k) {
      res.per_category.push_back(
          {gt_.categories()[k].id, gt_.categories()[k].name, MeanAp({}, all, M_ - 1, k)});
    }
    res.summary.assign(res.stats.begin(), res.stats.end());
    return res;
  }

  // pycocotools' _summarizeKps, at the last maxDets (20 by default).
  CocoEvalResult SummarizeKeypoints() const {
    CocoEvalResult res;
    const size_t all = AreaIndex("all"), md = AreaIndex("medium"), l = AreaIndex("large");
    const size_t m = M_ - 1;
    res.summary = {MeanAp({}, all, m, {}), MeanAp(0.5, all, m, {}), MeanAp(0.75, all, m, {}),
                   MeanAp({}, md, m, {}),  MeanAp({}, l, m, {}),    MeanAr(all, m),
                   MeanAr(all, m, 0.5),    MeanAr(all, m, 0.75),    MeanAr(md, m),
                   MeanAr(l, m)};
    const auto& s = res.summary;
    res.stats = {s[0], s[1], s[2], -1, s[3], s[4], -1, -1, s[5], -1, s[8], s[9]};
    for (size_t k = 0; k < K_; ++k) {
      res.per_category.push_back(
          {gt_.categories()[k].id, gt_.categories()[k].name, MeanAp({}, all, m, k)});
    }
    return res;
  }

  const CocoDataset& gt_;
  const std::vector<Detection>& dets_;
  IouType type_;
  CocoEvalParams p_;
  size_t T_ = 0, R_ = 0, K_ = 0, A_ = 0, M_ = 0;
  std::vector<PreparedDet> prepared_;
  std::vector<size_t> sorted_images_;
  std::vector<ImageRefs> refs_;
  std::vector<double> precision_, recall_;
};

}  // namespace

CocoEvalResult EvaluateCoco(const CocoDataset& ground_truth,
                            const std::vector<Detection>& detections, IouType iou_type,
                            const CocoEvalParams& params) {
  Evaluator ev(ground_truth, detections, iou_type, params);
  return ev.Run();
}

}  // namespace mrcnn::eval
