// `trainer evaluate`: COCO box, mask or keypoint (OKS) AP of a results file against ground truth.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>

#include "trainer/commands/command_registry.h"
#include "trainer/eval/coco_eval.h"

namespace mrcnn::trainer {
namespace {

struct EvaluateArgs {
  std::string annotations, results, iou_type = "bbox", output;
  std::vector<double> oks_sigmas;
  bool per_category = false;
  int threads = 0;
};

int RunEvaluate(const EvaluateArgs& args) {
  const auto type = eval::ParseIouType(args.iou_type);
  const auto t0 = std::chrono::steady_clock::now();
  auto gt = data::CocoDataset::Load(args.annotations, eval::GroundTruthLoadOptions());
  auto dets = eval::LoadResults(args.results, gt);
  const auto t1 = std::chrono::steady_clock::now();
  if (!args.oks_sigmas.empty() && type != eval::IouType::kKeypoints)
    throw std::invalid_argument("--oks-sigmas is for --iou-type keypoints only");
  for (double s : args.oks_sigmas) {
    if (!(s > 0))
      throw std::invalid_argument("--oks-sigmas: every sigma must be > 0, got " + std::to_string(s));
  }
  eval::CocoEvalParams params = type == eval::IouType::kKeypoints
                                    ? eval::CocoEvalParams::ForKeypoints(args.oks_sigmas)
                                    : eval::CocoEvalParams();
  params.num_threads = args.threads;
  auto result = eval::EvaluateCoco(gt, dets, type, params);
  const auto t2 = std::chrono::steady_clock::now();
  std::fputs(eval::FormatStatsTable(result, type).c_str(), stdout);
  if (args.per_category) {
    std::printf("per-category AP (IoU=0.50:0.95, area=all, maxDets=%lld):\n",
                static_cast<long long>(params.max_dets.back()));
    for (const auto& c : result.per_category) {
      std::printf("  %-24s (id %lld): %.4f\n", c.name.c_str(),
                  static_cast<long long>(c.category_id), c.ap);
    }
  }
  const double load_s = std::chrono::duration<double>(t1 - t0).count();
  const double eval_s = std::chrono::duration<double>(t2 - t1).count();
  std::printf("loaded %zu images, %zu detections in %.3f s; evaluated in %.3f s\n",
              gt.images().size(), dets.size(), load_s, eval_s);
  if (!args.output.empty()) {
    std::ofstream out(args.output);
    out << eval::StatsToJson(result, type, args.per_category);
    if (!out)
      throw std::runtime_error(args.output + ": cannot write the stats JSON");
  }
  return 0;
}

const CommandRegistration kEvaluate{
    "evaluate", "COCO box/mask/keypoint AP of a results file (pycocotools COCOeval numbers)",
    [](CLI::App& sub) -> CommandAction {
      auto args = std::make_shared<EvaluateArgs>();
      sub.add_option("--annotations", args->annotations, "ground-truth COCO instances JSON")
          ->required()
          ->check(CLI::ExistingFile);
      sub.add_option("--results", args->results, "COCO results JSON (list of detections)")
          ->required()
          ->check(CLI::ExistingFile);
      sub.add_option("--iou-type", args->iou_type,
                     "bbox, segm or keypoints (object keypoint similarity, maxDets 20)")
          ->check(CLI::IsMember({"bbox", "segm", "keypoints"}));
      sub.add_option("--oks-sigmas", args->oks_sigmas,
                     "keypoints: one OKS sigma per keypoint, comma-separated (default: COCO's 17 "
                     "person sigmas)")
          ->delimiter(',');
      sub.add_option("--output", args->output, "write the stats as JSON here");
      sub.add_flag("--per-category", args->per_category, "also report AP per category");
      sub.add_option("--threads", args->threads, "worker threads (0 = all cores)");
      return [args] { return RunEvaluate(*args); };
    }};

}  // namespace
}  // namespace mrcnn::trainer
