#pragma once
// The training job's components, each built from the resolved config by one small
// function (Detectron2's build_* functions), each callable alone (test_engine_builders).
// Every function validates the keys it reads and throws common::ConfigError naming the
// key and the fix.
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>

#include "trainer/engine/checkpoint/checkpoint.h"
#include "trainer/engine/coco_evaluation.h"
#include "trainer/engine/config/job_config.h"
#include "trainer/engine/distributed/process_world.h"
#include "trainer/engine/events/console_log.h"
#include "trainer/engine/solver/grad_scaler.h"
#include "trainer/engine/solver/lr_schedule.h"
#include "trainer/engine/solver/optimizer_registry.h"
#include "trainer/engine/train_step.h"
#include "trainer/model/meta_arch/meta_arch.h"

namespace mrcnn::data {
class CocoDataset;
class DataLoader;
}  // namespace mrcnn::data

namespace mrcnn::engine {

namespace dist {
class DataParallel;
}

// MODEL.DEVICE: auto | cpu | cuda; auto and cuda take GPU local_rank % device count.
c10::Device BuildDevice(const TrainConfig& config, int64_t local_rank);

// The data-parallel group (rendezvous with the other ranks, bounded by
// DIST.TIMEOUT_SECONDS; a no-op with one process). On a node shared by several ranks
// without OMP_NUM_THREADS, each takes cores / LOCAL_WORLD_SIZE intra-op threads.
std::unique_ptr<dist::DataParallel> BuildDataParallel(const TrainConfig& config,
                                                      const ProcessWorld& world,
                                                      const c10::Device& device);

// SEED (a clock seed when < 0), rank 0's on every rank.
int64_t BuildSeed(const TrainConfig& config, dist::DataParallel& dp);

model::ModelConfig BuildModelConfig(const TrainConfig& config);

// What loading initial weights by name did; each list in name order.
struct WeightsLoad {
  std::vector<std::string> loaded;            // name and shape match: copied in
  std::vector<std::string> not_in_model;      // in the file only: skipped
  std::vector<std::string> shape_differs;     // "name: file [..] vs model [..]": skipped
  std::vector<std::string> left_initialised;  // in the model only: keep their initialisation
};

// Copies the tensors of a safetensors file into `net` by name (torchvision state_dict keys)
// where the shapes match. Throws common::ConfigError for MODEL.WEIGHTS when nothing matches.
WeightsLoad LoadWeightsByName(model::MetaArchitecture& net, const std::filesystem::path& file);

// The log lines a person reads to see what a run starts from: counts, then the skipped
// tensors by name and the parameters left at initialisation grouped by module (e.g.
// "roi_heads.box_predictor: 4"), so a backbone-only file shows exactly which heads start
// from scratch.
std::vector<std::string> DescribeWeightsLoad(const WeightsLoad& load,
                                             const std::filesystem::path& file);

// Whether MODEL.WEIGHTS is a Detectron2 checkpoint (.pth, .pkl) rather than our safetensors.
bool IsDetectron2Checkpoint(const std::filesystem::path& file);

// The model on `device`, seeded by the caller (torch::manual_seed) for its initialisation,
// with MODEL.WEIGHTS loaded when given: a safetensors file by our names (LoadWeightsByName,
// logged as DescribeWeightsLoad), a Detectron2 or Caffe2 checkpoint mapped onto them
// (trainer/model/weights/weights_import.h, which logs what it loaded and skipped).
std::shared_ptr<model::MetaArchitecture> BuildModel(
    const model::ModelConfig& mc, const c10::Device& device,
    const std::optional<std::filesystem::path>& weights, const ConsoleLog& log);

NamedParameters ParametersOf(model::MetaArchitecture& net);

LrSchedule BuildLrSchedule(const TrainConfig& config);

// How SOLVER.IMS_PER_BATCH (the global batch) splits into processes and micro-batches.
struct StepPlan {
  int64_t max_iter = 0;
  int64_t images_per_iteration = 0;  // SOLVER.IMS_PER_BATCH
  int64_t accumulation = 1;          // SOLVER.ACCUMULATION_STEPS
  int64_t micro_batch = 0;           // images per process per micro-batch
};
StepPlan BuildStepPlan(const TrainConfig& config, int64_t world_size);

// SOLVER.AMP.*: the autocast dtype on CUDA (nullopt: float32, always on CPU).
std::optional<at::ScalarType> BuildAmpDtype(const TrainConfig& config, const c10::Device& device);
// Dynamic loss scaling, enabled for float16 autocast only.
GradScaler BuildGradScaler(const TrainConfig& config, const c10::Device& device);
// SOLVER.CUDA_GRAPHS.SHAPES as (height, width) pairs: positive integers, multiples of
// INPUT.SIZE_DIVISIBILITY.
std::vector<std::array<int64_t, 2>> BuildGraphShapes(const TrainConfig& config);
// AMP, SOLVER.CLIP_GRADIENTS.* and SOLVER.CUDA_GRAPHS.* for TrainStep; `micro_batch`: the
// images per process and micro-batch (StepPlan), the size graphed batches are padded to.
// SOLVER.CUDA_GRAPHS.ENABLED on a CPU device, or in a build without CUDA, is a ConfigError.
TrainStepOptions BuildTrainStepOptions(const TrainConfig& config, const c10::Device& device,
                                       int64_t micro_batch = 1);

// The training channel's dataset, validated against MODEL.ROI_HEADS.NUM_CLASSES, with a
// "[data]" summary line.
struct TrainData {
  DatasetSource source;
  std::shared_ptr<const data::CocoDataset> dataset;
};
TrainData BuildTrainData(const TrainJob& job, const model::ModelConfig& mc, const ConsoleLog& log);

// The first val/test channel present (job.test_dir), if any.
std::optional<DatasetSource> BuildTestSource(const TrainJob& job);

// The shuffled, augmented, infinite training loader of this rank, positioned after
// `batches_consumed` batches (the batches are a function of the seed and their position,
// so a resumed run continues exactly where the checkpoint was taken).
std::unique_ptr<data::DataLoader> BuildTrainLoader(const TrainConfig& config,
                                                   const model::ModelConfig& mc,
                                                   const TrainData& train,
                                                   const ProcessWorld& world, const StepPlan& plan,
                                                   int64_t seed, int64_t batches_consumed);

// The checkpoint directory (job.checkpoint_dir) keeping SOLVER.CHECKPOINTS_TO_KEEP files.
CheckpointDir BuildCheckpointDir(const TrainJob& job);

}  // namespace mrcnn::engine
