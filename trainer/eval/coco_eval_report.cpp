// Text table and JSON for CocoEvalResult.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <vector>

#include "trainer/eval/coco_eval.h"

namespace mrcnn::eval {

std::string FormatStatsTable(const CocoEvalResult& result, IouType iou_type) {
  struct Row {
    bool ap;
    const char* iou;
    const char* area;
    int max_dets;
  };
  static const std::vector<Row> kRows = {
      {true, "0.50:0.95", "all", 100},     {true, "0.50", "all", 100},
      {true, "0.75", "all", 100},          {true, "0.50:0.95", "small", 100},
      {true, "0.50:0.95", "medium", 100},  {true, "0.50:0.95", "large", 100},
      {false, "0.50:0.95", "all", 1},      {false, "0.50:0.95", "all", 10},
      {false, "0.50:0.95", "all", 100},    {false, "0.50:0.95", "small", 100},
      {false, "0.50:0.95", "medium", 100}, {false, "0.50:0.95", "large", 100}};
  // pycocotools' _summarizeKps (maxDets 20).
  static const std::vector<Row> kKeypointRows = {
      {true, "0.50:0.95", "all", 20},     {true, "0.50", "all", 20},
      {true, "0.75", "all", 20},          {true, "0.50:0.95", "medium", 20},
      {true, "0.50:0.95", "large", 20},   {false, "0.50:0.95", "all", 20},
      {false, "0.50", "all", 20},         {false, "0.75", "all", 20},
      {false, "0.50:0.95", "medium", 20}, {false, "0.50:0.95", "large", 20}};
  const bool keypoints = iou_type == IouType::kKeypoints;
  const std::vector<Row>& rows = keypoints ? kKeypointRows : kRows;
  std::string out = std::string("COCO evaluation (") + IouTypeName(iou_type) + ")\n";
  char line[160];
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    const double value = keypoints ? result.summary.at(i) : result.stats[i];
    std::snprintf(line, sizeof(line), " %-18s %s @[ IoU=%-9s | area=%6s | maxDets=%3d ] = %0.3f\n",
                  r.ap ? "Average Precision" : "Average Recall", r.ap ? "(AP)" : "(AR)", r.iou,
                  r.area, r.max_dets, value);
    out += line;
  }
  return out;
}

std::string StatsToJson(const CocoEvalResult& result, IouType iou_type, bool per_category) {
  nlohmann::ordered_json j;
  j["iou_type"] = IouTypeName(iou_type);
  nlohmann::ordered_json stats;
  if (iou_type == IouType::kKeypoints) {
    for (size_t i = 0; i < CocoEvalResult::kKeypointStatNames.size(); ++i)
      stats[CocoEvalResult::kKeypointStatNames[i]] = result.summary.at(i);
    j["stats"] = stats;
    j["stats_list"] = result.summary;  // pycocotools' COCOeval.stats
  } else {
    for (size_t i = 0; i < 12; ++i)
      stats[CocoEvalResult::kStatNames[i]] = result.stats[i];
    j["stats"] = stats;
    j["stats_list"] = result.stats;
  }
  if (per_category) {
    nlohmann::ordered_json cats = nlohmann::ordered_json::array();
    for (const auto& c : result.per_category) {
      cats.push_back({{"category_id", c.category_id}, {"name", c.name}, {"AP", c.ap}});
    }
    j["per_category"] = cats;
  }
  return j.dump(2) + "\n";
}

}  // namespace mrcnn::eval
