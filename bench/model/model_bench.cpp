// Times InferenceModel::Predict (uint8 RGB in, detections with pasted masks out) on
// images from a safetensors file. Driven by bench_inference.py, which times
// torchvision on the same images and weights in the same run and prints the ratio.
//
//   model_bench --model-dir DIR --input IMAGES.safetensors [--batch B] [--iters N]
//               [--warmup W] [--threads T] [--device cpu|cuda]
//               [--precision auto|fp32|fp16|bf16] [--score-threshold S] [--phases]
//               [--profile TRACE.json]
// IMAGES: image.<i> uint8 H x W x 3. Prints one JSON line: mean and fastest time, the
// detections, the precision used, and with --phases the mean ms of each stage of the
// model's forward pass (MetaArchitecture::set_phase_hook; "predict_rest" is what Predict does
// around it: input conversion and copying the detections out). --profile records the timed
// iterations with the torch profiler (CPU ops) into a Chrome trace.
#include <torch/csrc/autograd/profiler_kineto.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "bench/model/bench_args.h"
#include "common/allocator_tuning.h"
#include "trainer/model/inference/inference.h"
#include "trainer/model/safetensors.h"

using mrcnn::bench::Arg;

int main(int argc, char** argv) {
  using namespace mrcnn::model;
  mrcnn::common::KeepFreedMemoryForReuse();  // as the server and the trainer run
  try {
    InferenceOptions options;
    options.device = Arg(argc, argv, "--device", "cpu");
    options.precision = Arg(argc, argv, "--precision", "fp32");
    options.num_threads = std::stoi(Arg(argc, argv, "--threads", "0"));
    auto model = InferenceModel::Load(Arg(argc, argv, "--model-dir", nullptr), options);
    TensorMap input = ReadSafetensors(Arg(argc, argv, "--input", nullptr));
    const size_t batch = std::stoul(Arg(argc, argv, "--batch", "1"));
    const int iters = std::stoi(Arg(argc, argv, "--iters", "5"));
    const int warmup = std::stoi(Arg(argc, argv, "--warmup", "1"));
    PredictOptions predict;
    predict.score_threshold = std::stof(Arg(argc, argv, "--score-threshold", "0.05"));
    std::vector<InferenceModel::ImageView> views;
    for (size_t i = 0; i < batch; ++i) {
      const at::Tensor& t = input.at("image." + std::to_string(i));
      views.push_back({t.data_ptr<uint8_t>(), t.size(0), t.size(1)});
    }
    const std::string profile = Arg(argc, argv, "--profile", "");
    std::map<std::string, double> phase_ms;  // summed over the timed iterations
    bool timing = false;
    auto last = std::chrono::steady_clock::now();
    if (mrcnn::bench::Flag(argc, argv, "--phases")) {
      model->SetPhaseHook([&](const char* name) {
        const auto now = std::chrono::steady_clock::now();
        if (name != nullptr && timing)
          phase_ms[name] += std::chrono::duration<double, std::milli>(now - last).count();
        last = now;
      });
    }
    size_t detections = 0;
    std::vector<double> ms;
    for (int i = 0; i < warmup + iters; ++i) {
      if (i == warmup && !profile.empty()) {
        namespace prof = torch::profiler::impl;
        const prof::ProfilerConfig config(prof::ProfilerState::KINETO,
                                          /*report_input_shapes=*/true, /*profile_memory=*/false);
        torch::autograd::profiler::prepareProfiler(config, {prof::ActivityType::CPU});
        torch::autograd::profiler::enableProfiler(config, {prof::ActivityType::CPU});
      }
      timing = i >= warmup;
      auto start = std::chrono::steady_clock::now();
      auto out = model->Predict(views, predict);
      const double elapsed =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count();
      if (i >= warmup)
        ms.push_back(elapsed);
      detections = 0;
      for (const auto& r : out)
        detections += r.detections.size();
    }
    if (!profile.empty())
      torch::autograd::profiler::disableProfiler()->save(profile);
    double sum = 0, best = ms.front();
    for (double v : ms) {
      sum += v;
      best = std::min(best, v);
    }
    std::string phases;
    double in_phases = 0;
    for (const auto& [name, total] : phase_ms) {
      phases += ", \"" + name + "\": " + std::to_string(total / static_cast<double>(ms.size()));
      in_phases += total / static_cast<double>(ms.size());
    }
    if (!phase_ms.empty()) {
      phases = ", \"phases_ms\": {\"predict_rest\": " +
               std::to_string(sum / static_cast<double>(ms.size()) - in_phases) + phases + "}";
    }
    std::printf(
        "{\"mean_ms\": %.3f, \"min_ms\": %.3f, \"detections\": %zu, \"precision\": \"%s\"%s}\n",
        sum / static_cast<double>(ms.size()), best, detections, model->Precision().c_str(),
        phases.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "model_bench: %s\n", e.what());
    return 1;
  }
}
