// libFuzzer target over COCO annotation files and results files: the streaming parser
// (json_cursor, coco_json_fields, coco_dataset) in the training view and the evaluation
// view, the mask API on what it read, and COCO box and mask evaluation of a results file
// against it. The input's parts (fuzz_input_parts.h) are the instances file and,
// optionally, a results file. std::runtime_error (a bad file) and std::invalid_argument (a
// mask or detection the API refuses) are the expected rejections; any other exception, a
// crash, a sanitizer report, or a compressed RLE string that does not read back as the same
// mask is a finding.
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "test/fuzz/fuzz_input_parts.h"
#include "trainer/data/coco_dataset.h"
#include "trainer/data/mask_rle.h"
#include "trainer/eval/coco_eval.h"

namespace {

using namespace mrcnn;

void ExerciseMasks(const data::CocoDataset& dataset) {
  for (const auto& annotation : dataset.annotations()) {
    if (const auto* rle = std::get_if<data::Rle>(&annotation.segmentation)) {
      try {
        const data::Rle back =
            data::RleFromString(data::RleCountsToString(*rle), rle->height, rle->width);
        if (back.counts != rle->counts)
          std::abort();
      } catch (const std::invalid_argument&) {
      }
      data::RleArea(*rle);
      data::RleToBbox(*rle);
    }
  }
}

void Evaluate(const data::CocoDataset& ground_truth, std::string_view results) {
  const std::vector<eval::Detection> detections =
      eval::ParseResults(results, "results.json", ground_truth);
  eval::CocoEvalParams params;
  params.num_threads = 1;
  for (const auto type : {eval::IouType::kBbox, eval::IouType::kSegm}) {
    const eval::CocoEvalResult result = eval::EvaluateCoco(ground_truth, detections, type, params);
    eval::StatsToJson(result, type, true);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto parts = fuzz::SplitFuzzInput(data, size);
  try {
    data::CocoLoadOptions training;
    training.drop_images_without_annotations = true;
    ExerciseMasks(data::CocoDataset::Parse(parts[0], "instances.json", training));
  } catch (const std::runtime_error&) {
  } catch (const std::invalid_argument&) {
  }
  try {
    const data::CocoDataset ground_truth =
        data::CocoDataset::Parse(parts[0], "instances.json", eval::GroundTruthLoadOptions());
    ExerciseMasks(ground_truth);
    if (parts.size() > 1)
      Evaluate(ground_truth, parts[1]);
  } catch (const std::runtime_error&) {
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
