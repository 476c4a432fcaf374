// Times one training step of our Mask R-CNN: forward in train mode (backbone, FPN, RPN with
// its anchor matching and sampling, ROI heads with proposal matching, sampling and mask
// targets), the loss sum, backward, and the engine's SGD step, on a fixed batch read from a
// safetensors file. Driven by bench_train_step.py, which times torchvision's training step
// on the same images, targets and weights in the same run and prints the ratio.
//
//   train_step_bench --model-dir DIR --input BATCH.safetensors [--batch B] [--iters N]
//                    [--warmup W] [--threads T] [--device cpu|cuda] [--amp off|fp16|bf16]
//                    [--lr LR] [--momentum M] [--weight-decay WD] [--seed S] [--phases]
//                    [--optimizer sgd|novograd] [--steps-from-stdin] [--trace-op NAME]
//                    [--graph-shapes HxW[,HxW...] [--graph-mode graph|pad]] [--loss-scaling]
//                    [--mask-rows auto|fixed|exact]
// BATCH: image.<i> uint8 H x W x 3 (RGB), boxes.<i> float G x 4 (x1 y1 x2 y2 pixels),
// labels.<i> int64 G (1..K), masks.<i> uint8 G x H x W (0/1), for i < B. Images are used at
// their size (the loader's resize happens before the step, on its worker threads).
// Prints one JSON line: per-iteration milliseconds, images/s, the first step's losses and,
// with --phases, the mean time of each part of the step (synchronised on CUDA, which
// slows the step a little there). With --steps-from-stdin it prints "ready" once loaded,
// then runs one step per line read and prints that step's time, losses and phases: "step"
// a step that reads nothing back (the trainer's non-logging iterations), "log-step" one
// that reads its losses (a logging iteration); "count" and "count-log" run those under an
// ATen operator observer (aten_op_counter.h) and add the operator and host-sync counts
// ("ops") to the line. Counted steps are not timed steps: the observer slows every
// operator a little. On CUDA, counted steps also count every wait for the device that
// torch's sync debug mode reports ("cuda_syncs", cuda_sync_counter.h). --trace-op NAME
// prints the C++ stack of every call of that operator in a counted step (where a host
// sync comes from); --trace-op cuda-sync that of every CUDA wait.
//
// The step is RunTrainJob's own (engine::TrainStep, trainer/engine/train_step.h) with
// accumulation 1, one process, no clipping and a constant learning rate. --phases times
// its parts through TrainStep's phase hook, so the breakdown is of that same code.
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "bench/model/aten_op_counter.h"
#include "bench/model/bench_args.h"
#include "bench/model/cuda_sync_counter.h"
#include "common/allocator_tuning.h"
#include "trainer/data/batch.h"
#include "trainer/engine/cuda_graphs/padded_feature_stage.h"
#include "trainer/engine/model_inputs.h"
#include "trainer/engine/solver/grad_scaler.h"
#include "trainer/engine/solver/novograd.h"
#include "trainer/engine/solver/sgd.h"
#include "trainer/engine/train_step.h"
#include "trainer/model/config.h"
#include "trainer/model/meta_arch/meta_arch.h"
#include "trainer/model/safetensors.h"

namespace {

using mrcnn::bench::Arg;
using mrcnn::bench::Flag;

using Clock = std::chrono::steady_clock;
namespace model = mrcnn::model;
namespace engine = mrcnn::engine;
namespace data = mrcnn::data;

// The data loader's collation (trainer/data/batch.cpp): RGB in [0, 1] normalised with the
// model's pixel statistics, zero-padded bottom/right to a multiple of size_divisibility.
// Done once before timing, as the loader's workers do it off the training thread.
at::Tensor Collate(const std::vector<at::Tensor>& images_hwc, const model::ModelConfig& mc,
                   std::vector<std::array<int64_t, 2>>& sizes) {
  int64_t max_h = 0, max_w = 0;
  for (const auto& img : images_hwc) {
    sizes.push_back({img.size(0), img.size(1)});
    max_h = std::max(max_h, img.size(0));
    max_w = std::max(max_w, img.size(1));
  }
  const int64_t d = mc.size_divisibility;
  if (d > 1) {
    max_h = (max_h + d - 1) / d * d;
    max_w = (max_w + d - 1) / d * d;
  }
  at::Tensor batch = torch::zeros({static_cast<int64_t>(images_hwc.size()), 3, max_h, max_w});
  const auto mean = torch::tensor(std::vector<double>(mc.pixel_mean.begin(), mc.pixel_mean.end()))
                        .to(torch::kFloat)
                        .view({3, 1, 1});
  const auto stdev = torch::tensor(std::vector<double>(mc.pixel_std.begin(), mc.pixel_std.end()))
                         .to(torch::kFloat)
                         .view({3, 1, 1});
  for (size_t i = 0; i < images_hwc.size(); ++i) {
    const auto chw = images_hwc[i].permute({2, 0, 1}).to(torch::kFloat);
    batch[static_cast<int64_t>(i)]
        .narrow(1, 0, chw.size(1))
        .narrow(2, 0, chw.size(2))
        .copy_((chw - mean) / stdev);
  }
  return batch;
}

struct Phases {
  std::map<std::string, double> ms;
  bool enabled = false;
  bool cuda = false;
  Clock::time_point last;
  void Start() {
    if (enabled)
      last = Now();
  }
  void Mark(const char* name) {
    if (!enabled)
      return;
    const auto now = Now();
    ms[name] += std::chrono::duration<double, std::milli>(now - last).count();
    last = now;
  }
  Clock::time_point Now() const {
    if (cuda)
      torch::cuda::synchronize();
    return Clock::now();
  }
};

// SOLVER.CUDA_GRAPHS as the trainer builds it: the backbone, FPN and RPN head on the batch
// padded to the first shape that holds it, graphed (--graph-mode graph, CUDA) or eager on
// the same padded batch (--graph-mode pad), the reference for the graphs. Nothing without
// --graph-shapes.
void SetGraphOptions(int argc, char** argv, int64_t batch_size, engine::TrainStepOptions& o) {
  const std::string graph_shapes = Arg(argc, argv, "--graph-shapes", "");
  if (graph_shapes.empty())
    return;
  std::stringstream list(graph_shapes);
  std::string item;
  while (std::getline(list, item, ',')) {
    const size_t x = item.find('x');
    if (x == std::string::npos)
      throw std::runtime_error("--graph-shapes takes HxW[,HxW...], got '" + graph_shapes + "'");
    o.graph_shapes.push_back({std::stoll(item.substr(0, x)), std::stoll(item.substr(x + 1))});
  }
  o.graph_batch = batch_size;
  const std::string mode = Arg(argc, argv, "--graph-mode", "graph");
  if (mode != "graph" && mode != "pad")
    throw std::runtime_error("--graph-mode must be graph or pad, got '" + mode + "'");
  o.graph_padding_only = mode == "pad";
}

// The optimizer the bench steps with: the engine's Sgd at torch.optim.SGD's settings (one
// weight decay for every parameter, the peer's setting: the engine's norm group only holds
// trainable norm layers, which FrozenBN has none of), or NovoGrad at the engine's defaults
// (SageMakerCV's betas and eps) with the same groups.
std::unique_ptr<engine::Optimizer> MakeOptimizer(int argc, char** argv,
                                                 model::MetaArchitecture& net) {
  engine::SgdOptions so;
  so.momentum = std::stod(Arg(argc, argv, "--momentum", "0.9"));
  so.weight_decay = std::stod(Arg(argc, argv, "--weight-decay", "1e-4"));
  so.weight_decay_bias = so.weight_decay;
  so.weight_decay_norm = so.weight_decay;
  std::vector<std::pair<std::string, at::Tensor>> named;
  for (const auto& p : net.named_parameters())
    named.emplace_back(p.key(), p.value());
  const std::string name = Arg(argc, argv, "--optimizer", "sgd");
  if (name == "sgd")
    return std::make_unique<engine::Sgd>(named, so);
  if (name == "novograd") {
    engine::NovoGradOptions no;
    no.groups = so.groups();
    return std::make_unique<engine::NovoGrad>(named, no);
  }
  throw std::runtime_error("--optimizer must be sgd or novograd, got '" + name + "'");
}

// The batch as the loader hands it over (data::Batch: CPU tensors, collated), moved to the
// device in the step by the trainer's own ToImageBatch and ToTargets.
data::Batch ReadBatch(const std::string& path, int64_t batch_size, const model::ModelConfig& mc) {
  const model::TensorMap input = model::ReadSafetensors(path);
  std::vector<at::Tensor> images;
  data::Batch batch;
  for (int64_t i = 0; i < batch_size; ++i) {
    const std::string k = std::to_string(i);
    images.push_back(input.at("image." + k));
    batch.image_ids.push_back(i);
    batch.targets.push_back({input.at("boxes." + k).to(torch::kFloat),
                             input.at("labels." + k).to(torch::kLong),
                             mc.mask_on ? input.at("masks." + k) : at::Tensor(), at::Tensor()});
  }
  batch.images = Collate(images, mc, batch.image_sizes);
  batch.original_sizes = batch.image_sizes;
  return batch;
}

// One training step of the trainer's TrainStep on the fixed batch, as the trainer runs
// it (accumulation 1, constant lr, no sampling generators: the samplers draw from the
// global generator seeded by --seed).
class BenchStep {
 public:
  BenchStep(engine::TrainStep& step, engine::Optimizer& optimizer, data::Batch batch,
            const torch::Device& device, double lr, Phases& phases)
      : step_(step),
        optimizer_(optimizer),
        batch_(std::move(batch)),
        device_(device),
        lr_(lr),
        phases_(phases) {}

  // Returns the step's wall time in ms. A logging step (`read_losses`) reads its losses to
  // the host into losses() (one sync, as the trainer reads a window at every logging
  // iteration); other steps leave them on the device, as the trainer does. A `counted`
  // step is the trainer's alone: none of the bench's own waits for the device (timing,
  // phases, the overflow flag), which the counters would see.
  double Run(bool read_losses, bool counted) {
    ++number_;
    const bool wait = device_.is_cuda() && !counted;
    const bool phases_on = phases_.enabled;
    phases_.enabled = phases_on && !counted;
    if (wait)
      torch::cuda::synchronize();
    const auto t0 = Clock::now();
    phases_.Start();
    // Moving the batch to the device is part of the trainer's step too (ToImageBatch,
    // ToTargets); it falls into the first phase.
    const model::ImageBatch ib = engine::ToImageBatch(batch_, device_);
    const std::vector<model::ImageTarget> targets = engine::ToTargets(batch_, device_);
    const engine::MicroBatchLosses losses =
        step_.ForwardBackward(ib, targets, {}, /*accumulation=*/1, number_);
    optimizer_.set_lr(lr_);
    const at::Tensor found_inf = step_.Finish();
    losses_.clear();
    if (read_losses) {
      double total = 0;
      losses_ = losses.Read(&total);
      losses_["total"] = total;
      if (found_inf.defined() && !counted)  // loss scaling: 1 when the update was skipped
        losses_["skipped"] = found_inf.item<double>();
      step_.CheckFinite(total, number_);
    }
    phases_.enabled = phases_on;
    // The step itself waits for nothing: the time is the device's once it is done.
    if (wait)
      torch::cuda::synchronize();
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  }

  const std::map<std::string, double>& losses() const { return losses_; }

 private:
  engine::TrainStep& step_;
  engine::Optimizer& optimizer_;
  data::Batch batch_;
  torch::Device device_;
  double lr_;
  Phases& phases_;
  int64_t number_ = 0;
  std::map<std::string, double> losses_;
};

// A counted step: its operators (aten_op_counter.h) and, on CUDA, every wait torch makes
// for the device (cuda_sync_counter.h), into `out`.
void CountedStep(BenchStep& step, bool logging, bool cuda, const std::string& trace,
                 nlohmann::json& out) {
  std::optional<mrcnn::bench::CudaSyncCounter> waits;
  if (cuda && mrcnn::bench::CudaSyncCounter::Available())
    waits.emplace(trace == "cuda-sync");
  if (cuda)  // what came before is not the step's
    torch::cuda::synchronize();
  mrcnn::bench::AtenOpCounter counter(trace);
  out["ms"] = step.Run(logging, /*counted=*/true);
  const mrcnn::bench::AtenOpCounts counts = counter.Take();
  out["ops"] = {{"aten_ops", counts.all_ops},
                {"sync_ops", counts.sync_ops},
                {"sync_by_op", counts.sync_by_op},
                {"other_namespaces", counts.other_namespaces}};
  if (waits)
    out["ops"]["cuda_syncs"] = waits->Take();
  if (cuda)
    torch::cuda::synchronize();
}

// --steps-from-stdin: the driver interleaves our steps with torchvision's one by one, so
// both sides see the same background load on a shared machine: one step per input line,
// one JSON line per step.
int RunStepsFromStdin(BenchStep& step, const engine::TrainStep& train_step, Phases& phases,
                      bool cuda, const std::string& trace) {
  std::printf("ready\n");
  std::fflush(stdout);
  std::string line;
  while (std::getline(std::cin, line)) {
    phases.ms.clear();
    nlohmann::json out;
    const bool logging = line == "log-step" || line == "count-log";
    if (line == "count" || line == "count-log")
      CountedStep(step, logging, cuda, trace, out);
    else
      out["ms"] = step.Run(logging, /*counted=*/false);
    out["losses"] = step.losses();
    out["phases_ms"] = phases.ms;
    if (const engine::PaddedFeatureStage* stage = train_step.feature_stage())
      out["feature_stage_runs"] = {{"padded", stage->padded_runs()},
                                   {"unpadded", stage->eager_runs()}};
    std::printf("%s\n", out.dump().c_str());
    std::fflush(stdout);
  }
  return 0;
}

// `warmup` then `iters` timed steps; one JSON line with the times, the first losses and
// the mean phase times.
int RunTimed(BenchStep& step, Phases& phases, int warmup, int iters, int64_t batch_size) {
  std::vector<double> ms;
  std::map<std::string, double> first_losses;
  for (int it = 0; it < warmup + iters; ++it) {
    if (it == warmup)
      phases.ms.clear();
    const double elapsed = step.Run(/*read_losses=*/it == 0, /*counted=*/false);
    if (it == 0)
      first_losses = step.losses();
    if (it >= warmup)
      ms.push_back(elapsed);
  }
  double sum = 0;
  for (double v : ms)
    sum += v;
  const double mean = sum / static_cast<double>(ms.size());
  nlohmann::json out;
  out["ms"] = ms;
  out["mean_ms"] = mean;
  out["min_ms"] = *std::min_element(ms.begin(), ms.end());
  out["images_per_s"] = 1000.0 * static_cast<double>(batch_size) / mean;
  out["threads"] = at::get_num_threads();
  out["first_losses"] = first_losses;
  nlohmann::json phase_ms = nlohmann::json::object();
  for (const auto& [k, v] : phases.ms)
    phase_ms[k] = v / iters;
  out["phases_ms"] = phase_ms;
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  mrcnn::common::KeepFreedMemoryForReuse();  // as the trainer runs
  try {
    const std::filesystem::path model_dir = Arg(argc, argv, "--model-dir", nullptr);
    const int64_t batch_size = std::stoll(Arg(argc, argv, "--batch", "2"));
    const int iters = std::stoi(Arg(argc, argv, "--iters", "5"));
    const int warmup = std::stoi(Arg(argc, argv, "--warmup", "1"));
    const int threads = std::stoi(Arg(argc, argv, "--threads", "0"));
    const std::string amp_name = Arg(argc, argv, "--amp", "off");
    const std::string mask_rows = Arg(argc, argv, "--mask-rows", "auto");
    if (threads > 0)
      torch::set_num_threads(threads);
    if (iters < 1 || warmup < 0)
      throw std::runtime_error("--iters must be >= 1 and --warmup >= 0");
    if (amp_name != "off" && amp_name != "fp16" && amp_name != "bf16")
      throw std::runtime_error("--amp must be off, fp16 or bf16");
    if (mask_rows != "auto" && mask_rows != "fixed" && mask_rows != "exact")
      throw std::runtime_error("--mask-rows must be auto, fixed or exact, got '" + mask_rows + "'");
    const torch::Device device(Arg(argc, argv, "--device", "cpu"));
    const bool cuda = device.is_cuda();
    // As the loop: autocast only on CUDA; fp16 with dynamic loss scaling, bf16 without.
    // --loss-scaling: fp16's loss scaling at any precision, so that its device-side
    // overflow check, skip and scale update are counted on a CPU too.
    const bool amp = cuda && amp_name != "off";
    const at::ScalarType amp_dtype = amp_name == "bf16" ? at::kBFloat16 : at::kHalf;
    engine::GradScaler scaler((amp && amp_dtype == at::kHalf) ||
                              Flag(argc, argv, "--loss-scaling"));

    torch::manual_seed(std::stoull(Arg(argc, argv, "--seed", "0")));
    model::ModelConfig mc = model::ModelConfig::FromYamlFile(model_dir / "config.yaml");
    mc.Validate((model_dir / "config.yaml").string());
    auto net = model::BuildModel(mc);
    model::LoadStateDict(*net, model::ReadSafetensors(model_dir / "model.safetensors"),
                         (model_dir / "model.safetensors").string());
    net->to(device);
    net->train();
    // The mask head's rows: auto as the trainer (fixed on CUDA, the exact positives read to
    // the host on a CPU); fixed shows a CPU run the CUDA step's host syncs.
    if (mask_rows != "auto")
      net->set_fixed_mask_rows(mask_rows == "fixed");
    const std::unique_ptr<engine::Optimizer> optimizer = MakeOptimizer(argc, argv, *net);

    engine::TrainStepOptions step_options;
    if (amp)
      step_options.amp_dtype = amp_dtype;
    step_options.nonfinite_advice = "lower --lr";
    SetGraphOptions(argc, argv, batch_size, step_options);
    engine::TrainStep train_step(*net, *optimizer, scaler, /*dp=*/nullptr, device,
                                 std::move(step_options));
    Phases phases;
    phases.enabled = Flag(argc, argv, "--phases");
    phases.cuda = cuda;
    if (phases.enabled)
      train_step.set_phase_hook([&phases](const char* name) { phases.Mark(name); });
    BenchStep step(train_step, *optimizer,
                   ReadBatch(Arg(argc, argv, "--input", nullptr), batch_size, mc), device,
                   std::stod(Arg(argc, argv, "--lr", "1e-4")), phases);
    if (Flag(argc, argv, "--steps-from-stdin"))
      return RunStepsFromStdin(step, train_step, phases, cuda, Arg(argc, argv, "--trace-op", ""));
    return RunTimed(step, phases, warmup, iters, batch_size);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_step_bench: %s\n", e.what());
    return 1;
  }
}
