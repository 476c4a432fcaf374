#include "trainer/engine/train_job.h"

#include <torch/torch.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "common/config_error.h"
#include "trainer/data/data_loader.h"
#include "trainer/engine/builders.h"
#include "trainer/engine/checkpoint/training_checkpointer.h"
#include "trainer/engine/cuda_graphs/padded_feature_stage.h"
#include "trainer/engine/distributed/data_parallel.h"
#include "trainer/engine/events/console_writer.h"
#include "trainer/engine/events/jsonl_writer.h"
#include "trainer/engine/events/mlflow_tracking.h"
#include "trainer/engine/events/tensorboard/tensorboard_writer.h"
#include "trainer/engine/hooks/evaluation.h"
#include "trainer/engine/hooks/iteration_timer.h"
#include "trainer/engine/hooks/lr_scheduler.h"
#include "trainer/engine/hooks/model_export.h"
#include "trainer/engine/hooks/parameter_histograms.h"
#include "trainer/engine/hooks/periodic_checkpointer.h"
#include "trainer/engine/hooks/periodic_writer.h"
#include "trainer/engine/hooks/run_report.h"
#include "trainer/engine/hooks/stop_signal.h"
#include "trainer/engine/hooks/weights_dump.h"
#include "trainer/engine/mask_rcnn_trainer.h"
#include "trainer/engine/model_export.h"
#include "trainer/engine/solver/reference_world_size.h"
#include "trainer/model/parts.h"

namespace mrcnn::engine {
namespace {

// Everything the hooks are built from; references outlive the trainer.
struct JobParts {
  const TrainJob& job;
  const ProcessWorld& world;
  const ConsoleLog& log;
  const model::ModelConfig& mc;
  const c10::Device& device;
  const StepPlan& plan;
  model::MetaArchitecture& net;
  Optimizer& optimizer;
  dist::DataParallel& dp;
  TrainingCheckpointer& checkpointer;
  const std::optional<DatasetSource>& test_source;
  const TrainData* train;  // null for eval-only
  MlflowTracking* mlflow;  // null unless rank 0 tracks to MLflow
};

std::function<void()> BarrierOf(dist::DataParallel& dp) {
  if (!dp.active())
    return {};
  return [&dp] { dp.Barrier(); };
}

std::vector<std::unique_ptr<EventWriter>> BuildWriters(const JobParts& p, int64_t start_iter) {
  std::vector<std::unique_ptr<EventWriter>> writers;
  if (p.world.rank != 0)
    return writers;
  const TrainWindowSpec spec{p.plan.max_iter, p.plan.images_per_iteration};
  writers.push_back(std::make_unique<ConsoleWriter>(p.log, spec, start_iter));
  writers.push_back(
      std::make_unique<JsonlWriter>(p.job.output_dir / "metrics.jsonl", spec, start_iter));
  if (p.job.tensorboard_dir) {
    auto tensorboard =
        std::make_unique<TensorBoardWriter>(*p.job.tensorboard_dir, spec, start_iter);
    p.log.Line("[tensorboard] writing " + tensorboard->file().string() +
               " (view: tensorboard --logdir " + p.job.tensorboard_dir->string() + ")");
    writers.push_back(std::move(tensorboard));
  }
  if (p.mlflow != nullptr)
    writers.push_back(p.mlflow->Writer(spec, start_iter));
  return writers;
}

EvaluationHook::Evaluate EvaluatorOf(const JobParts& p) {
  EvaluationTiles(p.job.config);  // checked now, not at the first evaluation
  const std::string precision = EvaluationPrecision(p.job.config, p.device.is_cuda());
  if (p.world.rank == 0 && p.test_source) {
    p.log.Line("[eval] evaluation runs in precision " + precision + " (TEST.PRECISION " +
               p.job.config.GetString("TEST.PRECISION") + ")");
  }
  if (p.world.rank != 0)
    return {};
  return [&p](int64_t completed) {
    return EvaluateChannel(p.net, *p.test_source, p.mc, p.job.config, p.device, completed);
  };
}

RunReportInputs ReportInputsOf(const JobParts& p) {
  RunReportInputs in;
  in.title = std::string(p.job.eval_only ? "Mask R-CNN evaluation" : "Mask R-CNN training run") +
             (p.job.paths.base.empty() ? "" : " (" + p.job.paths.base.string() + ")");
  in.config_yaml = p.job.config.ToYaml();
  in.device = p.device.str();
  in.processes = p.world.world_size;
  in.images_per_iteration = p.plan.images_per_iteration;
  return in;
}

// The hooks in the order they run (see README.md for why this order).
std::vector<std::unique_ptr<HookBase>> BuildHooks(const JobParts& p, TrainStep& step,
                                                  int64_t start_iter) {
  const TrainConfig& config = p.job.config;
  std::vector<std::unique_ptr<HookBase>> hooks;
  if (const char* dir = std::getenv("MRCNN_DUMP_WEIGHTS_DIR"); dir != nullptr && *dir != '\0') {
    hooks.push_back(std::make_unique<WeightsDumpHook>(
        [&p, path = std::filesystem::path(dir)](const std::string& when) {
          DumpWeights(p.net, path, p.world.rank, when);
        }));
  }
  hooks.push_back(std::make_unique<IterationTimerHook>(p.log));
  Optimizer& optimizer = p.optimizer;
  hooks.push_back(std::make_unique<LrSchedulerHook>(
      BuildLrSchedule(config), [&optimizer](double lr) { optimizer.set_lr(lr); }));
  auto checkpointer = std::make_unique<PeriodicCheckpointerHook>(
      p.checkpointer, config.GetInt("SOLVER.CHECKPOINT_PERIOD"), BarrierOf(p.dp));
  auto stop = std::make_unique<StopSignalHook>(*checkpointer, p.log);
  hooks.push_back(std::move(checkpointer));
  hooks.push_back(std::move(stop));
  if (p.test_source) {
    hooks.push_back(std::make_unique<EvaluationHook>(config.GetInt("TEST.EVAL_PERIOD"),
                                                     EvaluatorOf(p), BarrierOf(p.dp)));
  }
  if (const int64_t period = config.GetInt("TENSORBOARD.HISTOGRAM_PERIOD");
      period > 0 && p.world.rank == 0)
    hooks.push_back(std::make_unique<ParameterHistogramsHook>(period, ParametersOf(p.net), step));
  if (p.world.rank == 0) {
    hooks.push_back(std::make_unique<RunReportHook>(p.job.output_dir / "report.html",
                                                    ReportInputsOf(p), p.log));
  }
  hooks.push_back(std::make_unique<PeriodicWriterHook>(BuildWriters(p, start_iter),
                                                       config.GetInt("SOLVER.LOG_PERIOD")));
  std::function<void()> write_model;
  if (p.world.rank == 0) {
    write_model = [&p] {
      WriteModelDir(p.net, p.job.config, *p.train->dataset, p.job.model_dir);
      p.log.Line("[model] wrote " + p.job.model_dir.string() +
                 " (model.safetensors, config.yaml, classes.json)");
    };
  }
  hooks.push_back(std::make_unique<ModelExportHook>(std::move(write_model), BarrierOf(p.dp)));
  return hooks;
}

int RunEvalOnly(const JobParts& p, int64_t start_iter) {
  if (!p.test_source)
    throw common::ConfigError("config", "DATASETS.TEST", "eval-only needs a val or test channel");
  EventStorage storage;
  EvaluationOutput out = EvaluatorOf(p)(start_iter);
  for (auto& event : out.metrics)
    storage.PutEvaluation(std::move(event));
  for (auto& image : out.images)
    storage.PutImage(std::move(image));
  if (p.world.rank == 0)
    RunReportHook(p.job.output_dir / "report.html", ReportInputsOf(p), p.log).Write(storage);
  for (auto& writer : BuildWriters(p, start_iter)) {
    writer->WriteEvaluations(storage);
    writer->WriteMedia(storage);
    writer->Close();
  }
  return 0;
}

void LogJobStart(const TrainJob& job, const ConsoleLog& log) {
  std::string sources;
  for (const auto& src : job.config_sources)
    sources += (sources.empty() ? "" : " -> ") + src;
  log.Line("[config] sources: " + sources);
  log.Line("[config] resolved:\n" + job.config.ToYaml());
}

// SOLVER.CUDA_GRAPHS for the run-start line: "off" or the padded shapes, "800x1344, ...".
std::string GraphShapesText(const JobParts& p) {
  if (!p.job.config.GetBool("SOLVER.CUDA_GRAPHS.ENABLED"))
    return "off";
  std::string text;
  for (const auto& [h, w] : BuildGraphShapes(p.job.config))
    text += (text.empty() ? "" : ", ") + std::to_string(h) + "x" + std::to_string(w);
  return text;
}

void LogRunStart(const JobParts& p, const TrainingState& state) {
  const bool amp = BuildAmpDtype(p.job.config, p.device).has_value();
  p.log.Line("[train] device: " + p.device.str() + "  seed: " + std::to_string(state.seed) +
             "  processes: " + std::to_string(p.world.world_size) +
             " (gradient all-reduce: " + p.dp.gradient_backend() +
             (p.dp.overlaps_backward() ? ", overlapped with backward" : "") +
             ")  images/iter: " + std::to_string(p.plan.images_per_iteration) +
             "  accumulation: " + std::to_string(p.plan.accumulation) +
             "  amp: " + (amp ? p.job.config.GetString("SOLVER.AMP.DTYPE") : "off") +
             "  cuda graphs: " + GraphShapesText(p));
}

// With more than one rank, SyncBN layers take their batch statistics over every rank, through the
// ring's small sums (DataParallel::SumInPlace). Their backward sums during the backward pass, which
// the overlapped gradient buckets also use the ring for, and a CUDA graph cannot hold a host round
// trip: both are refused with SyncBN.
void ConnectSyncBatchNorm(const TrainConfig& config, model::MetaArchitecture& net,
                          dist::DataParallel& dp, const ConsoleLog& log) {
  if (!dp.active())
    return;  // one rank: SyncBN is BatchNorm over this process's batch
  const int64_t layers = model::SetSyncBatchNormGroup(
      net, [&dp](std::vector<double>& values) { dp.SumInPlace(values); });
  if (layers == 0)
    return;
  for (const char* key : {"DIST.OVERLAP_BACKWARD", "SOLVER.CUDA_GRAPHS.ENABLED"}) {
    if (config.GetBool(key))
      throw common::ConfigError("config", key,
                                "must be false with SyncBN norms (MODEL.*.NORM SyncBN): their "
                                "statistics are summed over the ranks inside forward and backward");
  }
  log.Line("[model] " + std::to_string(layers) + " SyncBN layers take batch statistics over " +
           std::to_string(dp.world_size()) + " ranks");
}

int RunTrackedJob(const TrainJob& job, const ProcessWorld& world, const ConsoleLog& log,
                  MlflowTracking* mlflow) {
  const TrainConfig& config = job.config;
  const c10::Device device = BuildDevice(config, world.local_rank);
  if (mlflow) {
    const bool amp = BuildAmpDtype(config, device).has_value();
    mlflow->Tag("device", device.str());
    mlflow->Tag("precision", amp ? config.GetString("SOLVER.AMP.DTYPE") : std::string("fp32"));
  }
  // Rendezvous first, so a rank that cannot reach the others fails before loading data.
  auto dp = BuildDataParallel(config, world, device);
  const int64_t seed = BuildSeed(config, *dp);
  const model::ModelConfig mc = BuildModelConfig(config);
  const std::optional<DatasetSource> test_source = BuildTestSource(job);
  std::optional<TrainData> train;
  if (!job.eval_only)
    train = BuildTrainData(job, mc, log);

  torch::manual_seed(static_cast<uint64_t>(seed));
  std::shared_ptr<model::MetaArchitecture> net = BuildModel(mc, device, job.weights, log);
  ConnectSyncBatchNorm(config, *net, *dp, log);
  auto optimizer = BuildOptimizer(config, ParametersOf(*net));
  const StepPlan plan = BuildStepPlan(config, world.world_size);
  GradScaler scaler = BuildGradScaler(config, device);
  TrainStepOptions step_options = BuildTrainStepOptions(config, device, plan.micro_batch);
  BuildLrSchedule(config);  // validated before anything long-running starts

  TrainingState state{*net, *optimizer, scaler, seed, 0};
  TrainingCheckpointer checkpointer(BuildCheckpointDir(job), state, *dp, log);
  const int64_t start_iter = checkpointer.ResumeOrLoad(job.resume, job.eval_only);
  const JobParts parts{job,   world,      log, mc,           device,      plan,
                       *net,  *optimizer, *dp, checkpointer, test_source, train ? &*train : nullptr,
                       mlflow};
  LogRunStart(parts, state);
  if (job.eval_only)
    return RunEvalOnly(parts, start_iter);

  auto loader =
      BuildTrainLoader(config, mc, *train, world, plan, state.seed, state.batches_consumed);
  TrainStep step(*net, *optimizer, scaler, dp.get(), device, std::move(step_options));
  EventStorage storage(world.world_size, [&dp](std::vector<double>& v) { dp->SumInPlace(v); });
  MaskRcnnTrainer trainer(std::move(storage), step, *loader, state, device, plan.accumulation,
                          config.GetInt("SOLVER.LOG_PERIOD"));
  trainer.RegisterHooks(BuildHooks(parts, step, start_iter));
  trainer.Train(start_iter, plan.max_iter);
  if (const PaddedFeatureStage* stage = step.feature_stage()) {
    log.Line("[train] cuda graphs: " + std::to_string(stage->padded_runs()) +
             " micro-batches padded and replayed, " + std::to_string(stage->eager_runs()) +
             " eager (no SOLVER.CUDA_GRAPHS.SHAPES entry held them)");
  }
  return 0;
}

MlflowJobFacts MlflowFactsOf(const TrainJob& job, const ProcessWorld& world) {
  MlflowJobFacts facts;
  facts.processes = world.world_size;
  facts.hosts = world.host;  // SM_HOSTS, when set, names them all (MlflowTracking::Start)
  return facts;
}

}  // namespace

int RunTrainJob(const TrainJob& unscaled, const ProcessWorld& world) {
  const ConsoleLog log(world.rank == 0);
  TrainJob job = unscaled;
  if (const std::string scaled = ScaleToReferenceWorldSize(job.config, world.world_size);
      !scaled.empty())
    log.Line("[config] " + scaled);
  LogJobStart(job, log);
  // Rank 0 alone tracks; a bad MLFLOW_TRACKING_URI fails the job before anything long runs.
  std::unique_ptr<MlflowTracking> mlflow =
      world.rank == 0 ? MlflowTracking::Start(job, MlflowFactsOf(job, world), log) : nullptr;
  int code = 0;
  try {
    code = RunTrackedJob(job, world, log, mlflow.get());
  } catch (const std::exception& e) {
    if (mlflow)
      mlflow->Finish("FAILED", e.what());
    throw;
  }
  if (mlflow)
    mlflow->Finish(StopRequested().load() ? "KILLED" : "FINISHED");
  return code;
}

}  // namespace mrcnn::engine
