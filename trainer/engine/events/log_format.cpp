#include "trainer/engine/events/log_format.h"

#include <fmt/format.h>

#include <cmath>

namespace mrcnn::engine {
namespace {

// A number as Python's float() would read it, including exponents.
constexpr const char* kNumber = R"(([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?))";
constexpr std::array<const char*, 6> kApNames = {"AP", "AP50", "AP75", "APs", "APm", "APl"};

std::string Field(const std::string& name, const std::string& value) { return "  " + name + ": " + value; }

}  // namespace

const std::array<const char*, 13> kLossNames = {
    "loss_classifier",     "loss_box_reg",        "loss_mask",           "loss_objectness",
    "loss_rpn_box_reg",    "loss_keypoint",       "loss_cls",            "loss_cls_stage0",
    "loss_cls_stage1",     "loss_cls_stage2",     "loss_box_reg_stage0", "loss_box_reg_stage1",
    "loss_box_reg_stage2"};

std::string FormatDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) seconds = 0;
  auto total = static_cast<int64_t>(std::llround(seconds));
  return fmt::format("{}:{:02}:{:02}", total / 3600, (total / 60) % 60, total % 60);
}

std::string FormatTrainLine(const TrainLogEntry& e) {
  std::string line = fmt::format("[train] iter: {}/{}", e.iteration, e.max_iter);
  line += Field("total_loss", fmt::format("{:.4f}", e.total_loss));
  for (const auto& [name, value] : e.losses) line += Field(name, fmt::format("{:.4f}", value));
  line += Field("lr", fmt::format("{:.6g}", e.lr));
  if (e.loss_scale) line += Field("loss_scale", fmt::format("{:.6g}", *e.loss_scale));
  line += Field("iter_time", fmt::format("{:.4f}", e.iter_time));
  line += Field("data_time", fmt::format("{:.4f}", e.data_time));
  line += Field("data_wait", fmt::format("{:.1f}%", 100.0 * e.data_wait_share));
  line += Field("images/s", fmt::format("{:.2f}", e.images_per_sec));
  line += Field("eta", FormatDuration(e.eta_seconds));
  line += Field("max_mem", fmt::format("{:.0f}MB", e.max_mem_mb));
  return line;
}

nlohmann::json TrainLogJson(const TrainLogEntry& e) {
  nlohmann::json j = {{"iteration", e.iteration},       {"max_iter", e.max_iter},
                      {"total_loss", e.total_loss},     {"lr", e.lr},
                      {"iter_time", e.iter_time},       {"data_time", e.data_time},
                      {"data_wait_share", e.data_wait_share},
                      {"images_per_sec", e.images_per_sec}, {"eta_seconds", e.eta_seconds},
                      {"max_mem_mb", e.max_mem_mb}};
  for (const auto& [name, value] : e.losses) j[name] = value;
  if (e.loss_scale) j["loss_scale"] = *e.loss_scale;
  return j;
}

std::string FormatEvalLine(const EvalLogEntry& e) {
  std::string line = fmt::format("[eval] iter: {}", e.iteration);
  for (size_t i = 0; i < kApNames.size(); ++i) {
    line += Field(e.iou_type + "/" + kApNames[i], fmt::format("{:.4f}", e.ap[i]));
  }
  return line;
}

nlohmann::json EvalLogJson(const EvalLogEntry& e) {
  nlohmann::json j = {{"iteration", e.iteration}};
  for (size_t i = 0; i < kApNames.size(); ++i) j[e.iou_type + "/" + kApNames[i]] = e.ap[i];
  return j;
}

nlohmann::json MetricDefinitions() {
  nlohmann::json defs = nlohmann::json::array();
  auto add = [&](const std::string& name, const std::string& regex) {
    defs.push_back({{"Name", name}, {"Regex", regex}});
  };
  // Train lines: anchor on the "[train]" tag so an eval line never feeds a train metric.
  const std::string train = R"(\[train\] .*)";
  add("train:iteration", R"(\[train\] iter: ([0-9]+)/)");
  add("train:total_loss", train + R"(\btotal_loss: )" + kNumber);
  for (const char* loss : kLossNames) add(std::string("train:") + loss, train + "\\b" + loss + ": " + kNumber);
  add("train:lr", train + R"(\blr: )" + kNumber);
  add("train:loss_scale", train + R"(\bloss_scale: )" + kNumber);
  add("train:iter_time", train + R"(\biter_time: )" + kNumber);
  add("train:data_time", train + R"(\bdata_time: )" + kNumber);
  add("train:data_wait_percent", train + R"(\bdata_wait: )" + kNumber + "%");
  add("train:images_per_sec", train + R"(\bimages/s: )" + kNumber);
  add("train:max_mem_mb", train + R"(\bmax_mem: )" + kNumber + "MB");
  for (const char* type : {"bbox", "segm", "keypoints"}) {
    for (const char* ap : kApNames) {
      add(std::string("val:") + type + "_" + ap, std::string(R"(\[eval\] .*\b)") + type + "/" + ap + ": " + kNumber);
    }
  }
  return defs;
}

std::vector<std::string> SampleLogLines() {
  std::vector<std::string> lines;
  TrainLogEntry e;
  e.max_iter = 90000;
  for (int64_t iteration : {20, 90000}) {
    e.iteration = iteration;
    double scale = iteration == 20 ? 1.0 : 1e-3;
    double i = 0;
    for (const char* loss : kLossNames) e.losses[loss] = scale * (0.5 + 0.1 * ++i);
    e.total_loss = scale * 3.5;
    e.lr = iteration == 20 ? 2e-5 : 0.02;
    e.iter_time = 0.3125;
    e.data_time = 0.0042;
    e.data_wait_share = iteration == 20 ? 0.0134 : 0.5;
    e.images_per_sec = 51.2;
    e.eta_seconds = 90000 - iteration;
    e.max_mem_mb = iteration == 20 ? 0 : 20480;
    if (iteration != 20) e.loss_scale = 32768;  // an fp16 run's line
    lines.push_back(FormatTrainLine(e));
  }
  for (const char* type : {"bbox", "segm", "keypoints"}) {
    lines.push_back(FormatEvalLine({90000, type, {0.375, 0.5625, 0.40625, -1, 0.25, 0.5}}));
  }
  return lines;
}

}  // namespace mrcnn::engine
