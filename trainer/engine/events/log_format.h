#pragma once
// The trainer's regex-friendly log lines and their SageMaker metric definitions. Every
// value is printed as `name: number` separated by two spaces, so one regex per metric
// (first capture group = value) picks it out of CloudWatch. Torch-free.
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace mrcnn::engine {

struct TrainLogEntry {
  int64_t iteration = 0;  // completed iterations (1-based)
  int64_t max_iter = 0;
  std::map<std::string, double> losses;  // loss_classifier, loss_box_reg, ...
  double total_loss = 0;
  double lr = 0;
  double iter_time = 0;        // seconds per iteration (averaged over the log period)
  double data_time = 0;        // seconds per iteration spent waiting for data
  double data_wait_share = 0;  // data_time / iter_time (the input pipeline's share)
  double images_per_sec = 0;   // over all processes
  double eta_seconds = 0;
  // MiB since the process started: CUDA peak allocated by the caching allocator
  // (max_memory_allocated); on CPU the process's peak resident set size.
  double max_mem_mb = 0;
  // fp16 training: the dynamic loss scale at the window's end (it halves on an overflowed,
  // skipped step); absent without loss scaling.
  std::optional<double> loss_scale;
};

// "[train] iter: 20/1000  total_loss: 1.2345  loss_box_reg: ...  lr: 0.00502  iter_time: 0.5123
//  data_time: 0.0100  images/s: 15.61  eta: 0:08:22  max_mem: 2817MB", with "loss_scale: 65536"
// after lr in fp16 training.
std::string FormatTrainLine(const TrainLogEntry& entry);
// The same values as one metrics.jsonl record.
nlohmann::json TrainLogJson(const TrainLogEntry& entry);

struct EvalLogEntry {
  int64_t iteration = 0;
  std::string iou_type;  // "bbox" | "segm"
  // AP, AP50, AP75, APs, APm, APl (fractions in [0, 1], -1 when undefined)
  std::array<double, 6> ap{};
};

// "[eval] iter: 1000  bbox/AP: 0.5123  bbox/AP50: 0.8012  bbox/AP75: ...  bbox/APl: ..."
std::string FormatEvalLine(const EvalLogEntry& entry);
nlohmann::json EvalLogJson(const EvalLogEntry& entry);

// Names of the losses the models report, each with a metric definition: the R-CNNs'
// (torchvision's names), then Detectron2's names of the zoo's other heads: Keypoint R-CNN's,
// RetinaNet's and Cascade R-CNN's per stage.
extern const std::array<const char*, 13> kLossNames;

// [{"Name": "train:total_loss", "Regex": "..."}, ...] for CreateTrainingJob's
// AlgorithmSpecification.MetricDefinitions (at most 40 entries, regexes <= 500 chars).
nlohmann::json MetricDefinitions();

// Train and eval lines formatted from fixed sample values covering every metric (small,
// exponent and negative numbers), for checking the regexes against the real formatter.
std::vector<std::string> SampleLogLines();

// "H:MM:SS"
std::string FormatDuration(double seconds);

}  // namespace mrcnn::engine
