// Test-only executable for the oracle tests in test/oracle/model: runs the C++ model
// stage by stage on images from a safetensors file and dumps the intermediate results,
// so pytest can compare each stage with torchvision without Python bindings.
//
//   model_parity_probe --model-dir DIR --input IN.safetensors --output OUT.safetensors
//                      [--mode eval|train] [--threads N] [--cpu-mode fp32|fp32-fast|bf16]
// --cpu-mode: the CPU inference fast path's mode in eval (fast_conv.h CpuDenseMode; fp32 by
// default, as without a scope; MRCNN_CPU_WINOGRAD=0 turns the fast path off).
// Input: image.<i> (3 x H x W float in [0, 1]); train mode also target.<i>.boxes,
// target.<i>.labels, target.<i>.masks, and for keypoint models target.<i>.keypoints.
// Output (eval): batch, image_size.<i>, feature.<l>, proposals.<i>, proposal_scores.<i>,
// boxes.<i>, scores.<i>, labels.<i>, masks.<i> (pasted probabilities).
// Output (train): loss.<name> for the five torchvision losses, and grad.<parameter> of
// their sum for the RPN head, the box and mask predictors and FPN's last layer block.
#include <torch/torch.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <string>

#include "trainer/model/backbone/fast_conv.h"
#include "trainer/model/config.h"
#include "trainer/model/meta_arch/generalized_rcnn.h"
#include "trainer/model/meta_arch/meta_arch.h"
#include "trainer/model/proposal_generator/proposal_generator.h"
#include "trainer/model/roi_heads/roi_heads.h"
#include "trainer/model/safetensors.h"
#include "trainer/model/weights/weights_import.h"

namespace {

std::string Arg(int argc, char** argv, const char* name, const char* fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0)
      return argv[i + 1];
  }
  if (fallback == nullptr)
    throw std::runtime_error(std::string("missing argument ") + name);
  return fallback;
}

int Run(int argc, char** argv) {
  using namespace mrcnn::model;
  const std::string model_dir = Arg(argc, argv, "--model-dir", nullptr);
  const std::string mode = Arg(argc, argv, "--mode", "eval");
  const int threads = std::stoi(Arg(argc, argv, "--threads", "0"));
  if (threads > 0)
    torch::set_num_threads(threads);
  TensorMap input = ReadSafetensors(Arg(argc, argv, "--input", nullptr));
  auto model = BuildModel(ModelConfig::FromYamlFile(model_dir + "/config.yaml"));
  if (std::filesystem::exists(model_dir + "/model.safetensors")) {
    LoadStateDict(*model, ReadSafetensors(model_dir + "/model.safetensors"),
                  model_dir + "/model.safetensors");
  } else {
    // A Detectron2 model dir (test/data/detectron2): its model_final.pth, mapped to our names.
    std::ostringstream log;
    LoadStateDict(*model,
                  weights::ReadDetectron2StateDict(model_dir + "/model_final.pth", *model, log),
                  model_dir + "/model_final.pth");
  }

  std::vector<at::Tensor> images;
  for (int i = 0; input.count("image." + std::to_string(i)) != 0; ++i)
    images.push_back(input.at("image." + std::to_string(i)));
  TensorMap out;
  if (mode == "train") {
    model->train();
    // --fixed-mask-rows 1|0: the mask head's padded (GPU) or exact (CPU) rows.
    if (const std::string fixed = Arg(argc, argv, "--fixed-mask-rows", ""); !fixed.empty())
      model->set_fixed_mask_rows(fixed == "1");
    std::vector<ImageTarget> targets;
    for (size_t i = 0; i < images.size(); ++i) {
      const std::string p = "target." + std::to_string(i) + ".";
      // Keypoint models also read target.<i>.keypoints (G x K x 3: x, y, visibility).
      const auto keypoints = input.find(p + "keypoints");
      targets.push_back({input.at(p + "boxes"), input.at(p + "labels"), input.at(p + "masks"),
                         keypoints == input.end() ? at::Tensor() : keypoints->second});
    }
    ModelOutput result = model->forward(images, targets);
    for (auto& [name, value] : result.losses)
      out["loss." + name] = value.detach().reshape({1});
    // Gradients of the summed losses for the heads and one FPN block (every loss reaches
    // them): grad.<parameter name>, torchvision's names.
    at::Tensor total = torch::zeros({});
    for (auto& [name, value] : result.losses)
      total = total + value;
    total.backward();
    for (const auto& p : model->named_parameters()) {
      const std::string& name = p.key();
      for (const char* prefix : {"rpn.head.", "roi_heads.box_predictor.",
                                 "roi_heads.mask_predictor.", "backbone.fpn.layer_blocks.3."}) {
        if (name.rfind(prefix, 0) == 0 && p.value().grad().defined())
          out["grad." + name] = p.value().grad();
      }
    }
  } else {
    model->eval();
    c10::InferenceMode guard;
    const CpuPrecisionScope cpu_mode(CpuDenseModeOf(Arg(argc, argv, "--cpu-mode", "fp32")));
    ImageBatch batch = model->Transform(images, nullptr);
    out["batch"] = batch.tensors;
    std::vector<at::Tensor> features = model->Features(batch.tensors);
    for (size_t l = 0; l < features.size(); ++l)
      out["feature." + std::to_string(l)] = features[l];
    // The stages one by one, to dump the proposals: the proposal generator's head, then the
    // proposals, then the ROI heads.
    auto& rcnn = dynamic_cast<GeneralizedRcnn&>(*model);
    FeatureStageOutput stage;
    stage.features = features;
    rcnn.proposal_generator().HeadOutputs(stage);
    RpnOutput rpn = rcnn.proposal_generator().Forward(batch, stage, nullptr);
    std::vector<ImageResult> detections;
    rcnn.roi_heads().Forward(rcnn.PooledLevels(features), rpn.proposals, batch.image_sizes, nullptr,
                             &detections);
    model->Postprocess(batch, detections);
    for (size_t i = 0; i < images.size(); ++i) {
      const std::string s = std::to_string(i);
      out["image_size." + s] = torch::tensor({batch.image_sizes[i][0], batch.image_sizes[i][1]});
      out["proposals." + s] = rpn.proposals[i];
      out["proposal_scores." + s] = rpn.scores[i];
      out["boxes." + s] = detections[i].boxes;
      out["scores." + s] = detections[i].scores;
      out["labels." + s] = detections[i].labels;
      if (detections[i].masks.defined())
        out["masks." + s] = detections[i].masks;
    }
  }
  WriteSafetensors(Arg(argc, argv, "--output", nullptr), out);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "model_parity_probe: %s\n", e.what());
    return 1;
  }
}
