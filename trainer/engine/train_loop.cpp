#include "trainer/engine/train_loop.h"

#include <ATen/Context.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <sys/resource.h>
#include <torch/torch.h>
#include <yaml-cpp/yaml.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <stdexcept>
#include <thread>

#include "common/config_error.h"
#include "trainer/data/coco_dataset.h"
#include "trainer/data/data_loader.h"
#include "trainer/data/mask_rle.h"
#include "trainer/engine/channel_layout.h"
#include "trainer/engine/checkpoint.h"
#include "trainer/engine/distributed/data_parallel.h"
#include "trainer/engine/grad_scaler.h"
#include "trainer/engine/log_format.h"
#include "trainer/engine/lr_schedule.h"
#include "trainer/engine/rng_state.h"
#include "trainer/engine/sgd.h"
#include "trainer/engine/train_step.h"
#include "trainer/eval/coco_eval.h"
#include "trainer/model/config.h"
#include "trainer/model/mask_rcnn.h"
#include "trainer/model/safetensors.h"

namespace mrcnn::engine {
namespace fs = std::filesystem;
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

int64_t EnvInt(const common::EnvMap& env, const std::string& key, int64_t fallback) {
  const auto value = common::Lookup(env, key);
  if (!value || value->empty())
    return fallback;
  try {
    size_t used = 0;
    const int64_t v = std::stoll(*value, &used);
    if (used != value->size())
      throw std::invalid_argument("trailing characters");
    return v;
  } catch (const std::exception&) {
    throw common::ConfigError("environment", key, "must be an integer, got \"" + *value + "\"");
  }
}

// Rank 0 prints; every line is flushed so the entrypoint forwards it at once.
class RankLog {
 public:
  explicit RankLog(bool enabled) : enabled_(enabled) {}
  void Line(const std::string& text) const {
    if (!enabled_)
      return;
    std::printf("%s\n", text.c_str());
    std::fflush(stdout);
  }
  bool enabled() const { return enabled_; }

 private:
  bool enabled_;
};

// Appends records to <output>/metrics.jsonl (rank 0 only), one JSON object a line.
class MetricsFile {
 public:
  MetricsFile(const fs::path& output_dir, bool enabled) {
    if (!enabled)
      return;
    fs::create_directories(output_dir);
    out_.open(output_dir / "metrics.jsonl", std::ios::app);
    if (!out_)
      throw std::runtime_error("cannot open " + (output_dir / "metrics.jsonl").string() +
                               " for appending");
  }
  void Write(const nlohmann::json& record) {
    if (!out_.is_open())
      return;
    out_ << record.dump() << '\n';
    out_.flush();
  }

 private:
  std::ofstream out_;
};

data::Normalization NormalizationOf(const model::ModelConfig& mc) {
  data::Normalization n;
  for (int c = 0; c < 3; ++c) {
    n.mean[c] = static_cast<float>(mc.pixel_mean[c] / 255.0);
    n.std[c] = static_cast<float>(mc.pixel_std[c] / 255.0);
  }
  return n;
}

torch::Device ChooseDevice(const std::string& name, int64_t local_rank) {
  if (name == "cpu")
    return torch::Device(torch::kCPU);
  const bool cuda = torch::cuda::is_available();
  if (name == "cuda" && !cuda) {
    throw common::ConfigError("config", "MODEL.DEVICE",
                              "is \"cuda\" but no CUDA device is available: use auto or cpu");
  }
  if (name != "cuda" && name != "auto") {
    throw common::ConfigError("config", "MODEL.DEVICE",
                              "must be auto, cpu or cuda, got \"" + name + "\"");
  }
  if (!cuda)
    return torch::Device(torch::kCPU);
  const int64_t count = static_cast<int64_t>(torch::cuda::device_count());
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(local_rank % count));
}

// Peak memory for the log's max_mem field, in MiB. On CUDA: the caching allocator's peak of
// bytes handed to tensors on this device (torch.cuda.max_memory_allocated, what Detectron2
// and torchvision's reference scripts print), so the figure is comparable with theirs. It
// goes through the device-generic allocator interface rather than c10/cuda headers because
// the trainer runs on CUDA through LibTorch even in builds without our CUDA kernels.
// On CPU: the process's peak resident set size (getrusage ru_maxrss, KiB on Linux), which
// includes the dataset and the loader's buffers, not only tensors: it is what a CPU job
// needs from the machine.
double PeakMemoryMb(const torch::Device& device) {
  if (device.is_cuda()) {
    const auto stats = c10::getDeviceAllocator(c10::kCUDA)->getDeviceStats(device.index());
    const auto aggregate = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
    return static_cast<double>(stats.allocated_bytes[aggregate].peak) / (1024.0 * 1024.0);
  }
  struct rusage usage {};
  if (getrusage(RUSAGE_SELF, &usage) != 0)
    return 0;
  return static_cast<double>(usage.ru_maxrss) / 1024.0;
}

// The model's batch from the loader's (already resized, normalised and padded) batch.
model::ImageBatch ToImageBatch(const data::Batch& batch, const torch::Device& device) {
  model::ImageBatch out;
  out.tensors = batch.images.to(device, /*non_blocking=*/true);
  out.image_sizes = batch.image_sizes;
  out.original_sizes = batch.original_sizes;
  return out;
}

std::vector<model::ImageTarget> ToTargets(const data::Batch& batch, const torch::Device& device) {
  std::vector<model::ImageTarget> targets;
  targets.reserve(batch.targets.size());
  for (const auto& t : batch.targets) {
    targets.push_back({t.boxes.to(device), t.labels.to(device),
                       t.masks.defined() ? t.masks.to(device) : t.masks});
  }
  return targets;
}

struct DatasetSource {
  ChannelLayout layout;
  std::string channel;
};

DatasetSource ChannelSource(const fs::path& dir, const std::string& channel,
                            const TrainConfig& config) {
  return {ResolveChannelLayout(dir, channel, config.GetString("DATASETS.ANNOTATION_FILE"),
                               config.GetString("DATASETS.IMAGE_DIR")),
          channel};
}

// COCO evaluation of the model on one channel: every image, in order, on this process.
std::array<std::optional<std::array<double, 12>>, 2> EvaluateChannel(model::MaskRcnn& net,
                                                                     const DatasetSource& source,
                                                                     const model::ModelConfig& mc,
                                                                     const TrainConfig& config,
                                                                     const torch::Device& device) {
  auto ground_truth =
      data::CocoDataset::Load(source.layout.annotation_file, eval::GroundTruthLoadOptions());
  data::CocoLoadOptions view;
  view.load_segmentation = false;
  auto images = std::make_shared<const data::CocoDataset>(
      data::CocoDataset::Load(source.layout.annotation_file, view));

  data::LoaderOptions lo;
  lo.image_root = source.layout.image_dir;
  lo.batch_size = 1;
  lo.num_workers = static_cast<int>(std::max<int64_t>(1, config.GetInt("DATALOADER.NUM_WORKERS")));
  lo.training = false;
  lo.group_by_aspect_ratio = false;
  lo.transform.min_sizes = {mc.min_size_test};
  lo.transform.max_size = mc.max_size_test;
  lo.transform.training = false;
  lo.transform.with_masks = false;
  lo.normalization = NormalizationOf(mc);
  lo.size_divisibility = mc.size_divisibility;
  data::DataLoader loader(images, lo);

  const bool was_training = net->is_training();
  net->eval();
  net->detection_settings().score_thresh = mc.box_score_thresh;
  net->detection_settings().detections_per_image =
      static_cast<int>(config.GetInt("TEST.DETECTIONS_PER_IMAGE"));
  net->detection_settings().masks = mc.mask_on;
  torch::NoGradGuard no_grad;
  std::vector<eval::Detection> boxes, masks;
  while (auto batch = loader.Next()) {
    model::ImageBatch ib = ToImageBatch(*batch, device);
    auto features = net->Features(ib.tensors);
    auto rpn = net->Rpn(ib, features, nullptr);
    std::vector<model::ImageResult> results;
    net->RoiHeads(features, rpn.proposals, ib.image_sizes, nullptr, &results);
    net->Postprocess(ib, results);
    for (size_t i = 0; i < results.size(); ++i) {
      const auto& r = results[i];
      auto b = r.boxes.to(torch::kCPU, torch::kDouble).contiguous();
      auto l = r.labels.to(torch::kCPU).contiguous();
      auto s = r.scores.to(torch::kCPU, torch::kDouble).contiguous();
      at::Tensor m;
      if (r.masks.defined())
        m = r.masks.ge(0.5).to(torch::kCPU, torch::kUInt8).contiguous();
      for (int64_t k = 0; k < b.size(0); ++k) {
        eval::Detection d;
        d.image_id = batch->image_ids[i];
        d.category_id = ground_truth.CategoryOfLabel(l[k].item<int64_t>());
        d.score = s[k].item<double>();
        const double* xyxy = b[k].data_ptr<double>();
        d.bbox = std::array<double, 4>{xyxy[0], xyxy[1], xyxy[2] - xyxy[0], xyxy[3] - xyxy[1]};
        boxes.push_back(d);
        if (m.defined()) {
          eval::Detection dm = d;
          dm.bbox.reset();
          dm.segmentation = data::EncodeMask(m[k][0].data_ptr<uint8_t>(), m.size(2), m.size(3));
          masks.push_back(std::move(dm));
        }
      }
    }
  }
  if (was_training)
    net->train();
  std::array<std::optional<std::array<double, 12>>, 2> stats;
  stats[0] = eval::EvaluateCoco(ground_truth, boxes, eval::IouType::kBbox).stats;
  if (mc.mask_on)
    stats[1] = eval::EvaluateCoco(ground_truth, masks, eval::IouType::kSegm).stats;
  return stats;
}

void LogEval(const RankLog& log, MetricsFile& metrics, int64_t iteration,
             const std::array<std::optional<std::array<double, 12>>, 2>& stats) {
  const char* types[2] = {"bbox", "segm"};
  for (int t = 0; t < 2; ++t) {
    if (!stats[t])
      continue;
    EvalLogEntry e;
    e.iteration = iteration;
    e.iou_type = types[t];
    for (int k = 0; k < 6; ++k)
      e.ap[k] = (*stats[t])[k];
    log.Line(FormatEvalLine(e));
    metrics.Write(EvalLogJson(e));
  }
}

// Model weights from MODEL.WEIGHTS: the whole model (every key), or a part of it (e.g. a
// backbone): tensors whose names and shapes match are loaded, the rest keep their
// initialisation. A file that matches nothing is an error.
void LoadInitialWeights(model::MaskRcnn& net, const fs::path& file, const RankLog& log) {
  model::TensorMap tensors = model::ReadSafetensors(file);
  model::TensorMap state = model::StateDict(*net);
  size_t matched = 0;
  std::vector<std::string> mismatched;
  torch::NoGradGuard no_grad;
  for (const auto& [name, value] : tensors) {
    auto it = state.find(name);
    if (it == state.end())
      continue;
    if (it->second.sizes() != value.sizes()) {
      mismatched.push_back(name);
      continue;
    }
    it->second.copy_(value.to(it->second.dtype()));
    ++matched;
  }
  if (matched == 0) {
    throw common::ConfigError(
        file.string(), "MODEL.WEIGHTS",
        "has no tensor named like the model's (torchvision state_dict keys, e.g. "
        "backbone.body.conv1.weight): convert it with scripts/convert_weights.py");
  }
  log.Line("[weights] loaded " + std::to_string(matched) + " of " + std::to_string(state.size()) +
           " tensors from " + file.string() +
           (mismatched.empty()
                ? ""
                : "; shape differs, kept initialised: " + std::to_string(mismatched.size()) +
                      " (e.g. " + mismatched.front() + ")"));
}

void WriteModelDir(model::MaskRcnn& net, const TrainConfig& config,
                   const data::CocoDataset& dataset, const fs::path& dir) {
  fs::create_directories(dir);
  model::TensorMap weights;
  for (const auto& [name, value] : model::StateDict(*net)) {
    if (name.size() >= 19 && name.compare(name.size() - 19, 19, "num_batches_tracked") == 0)
      continue;
    weights[name] = value.detach().to(torch::kCPU, torch::kFloat).contiguous();
  }
  model::WriteSafetensors(dir / "model.safetensors", weights, {{"format", "pt"}});
  TrainConfig written = config;
  written.Set("MODEL.WEIGHTS", ConfigValue(std::string()), "model dir");
  {
    std::ofstream out(dir / "config.yaml");
    out << written.ToYaml();
    if (!out)
      throw std::runtime_error("cannot write " + (dir / "config.yaml").string());
  }
  nlohmann::json classes = nlohmann::json::array();
  for (const auto& c : dataset.categories())
    classes.push_back({{"id", c.id}, {"name", c.name}});
  std::ofstream out(dir / "classes.json");
  out << classes.dump(2) << '\n';
  if (!out)
    throw std::runtime_error("cannot write " + (dir / "classes.json").string());
}

// The generator of one training image's anchor and RoI sampling: seeded from the run's
// seed, the iteration, the micro-batch and the image id only, so an image samples the same
// anchors whichever rank and batch slot it lands in (1 process with batch B and W
// processes with B/W then compute the same gradients).
at::Generator ImageSamplingGenerator(const torch::Device& device, uint64_t seed, int64_t iteration,
                                     int64_t micro, int64_t image_id) {
  auto mix = [](uint64_t x) {  // splitmix64 finaliser
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
  };
  uint64_t h = mix(seed);
  for (const int64_t v : {iteration, micro, image_id})
    h = mix(h ^ static_cast<uint64_t>(v));
  at::Generator base = at::globalContext().defaultGenerator(device);
  at::Generator g;
  {
    std::lock_guard<std::mutex> lock(base.mutex());
    g = base.clone();
  }
  g.set_current_seed(h >> 1);
  return g;
}

// MRCNN_DUMP_WEIGHTS_DIR=<dir>: every rank writes its weights before the first and after
// the last iteration to <dir>/<when>_rank<r>.safetensors (tests compare ranks and process
// counts with them).
void DumpWeightsIfAsked(model::MaskRcnn& net, int64_t rank, const std::string& when) {
  const char* dir = std::getenv("MRCNN_DUMP_WEIGHTS_DIR");
  if (dir == nullptr || *dir == '\0')
    return;
  model::TensorMap weights;
  for (const auto& [name, value] : model::StateDict(*net))
    weights[name] = value.detach().to(torch::kCPU).contiguous();
  fs::create_directories(dir);
  model::WriteSafetensors(fs::path(dir) / (when + "_rank" + std::to_string(rank) + ".safetensors"),
                          weights, {{"format", "pt"}});
}

std::atomic<bool> g_stop{false};

extern "C" void OnStopSignal(int) {
  g_stop.store(true);
}

// Window of per-iteration values between two log lines.
struct LogWindow {
  std::map<std::string, double> losses;
  double total = 0, iter_time = 0, data_time = 0;
  int64_t count = 0;
  void Clear() { *this = LogWindow(); }
};

}  // namespace

ProcessWorld ProcessWorld::FromEnv(const common::EnvMap& env) {
  ProcessWorld w;
  w.world_size = EnvInt(env, "WORLD_SIZE", 1);
  w.rank = EnvInt(env, "RANK", 0);
  w.local_rank = EnvInt(env, "LOCAL_RANK", 0);
  if (w.world_size < 1)
    throw common::ConfigError("environment", "WORLD_SIZE", "must be >= 1");
  if (w.rank < 0 || w.rank >= w.world_size) {
    throw common::ConfigError("environment", "RANK", "must be in [0, WORLD_SIZE)");
  }
  if (auto a = common::Lookup(env, "MASTER_ADDR"); a && !a->empty())
    w.master_addr = *a;
  w.master_port = static_cast<int>(EnvInt(env, "MASTER_PORT", 29500));
  return w;
}

std::atomic<bool>& StopRequested() {
  return g_stop;
}

void InstallStopHandlers() {
  struct sigaction sa {};
  sa.sa_handler = OnStopSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
}

int RunTrainJob(const TrainJob& job, const ProcessWorld& world) {
  const TrainConfig& config = job.config;
  const RankLog log(world.rank == 0);
  log.Line("[config] sources: " + [&] {
    std::string s;
    for (const auto& src : job.config_sources)
      s += (s.empty() ? "" : " -> ") + src;
    return s;
  }());
  log.Line("[config] resolved:\n" + config.ToYaml());

  int64_t seed = config.GetInt("SEED");
  if (seed < 0)
    seed = std::chrono::system_clock::now().time_since_epoch().count() & 0x7fffffff;

  const torch::Device device = ChooseDevice(config.GetString("MODEL.DEVICE"), world.local_rank);
  // Rendezvous first, so a rank that cannot reach the others fails before loading data.
  dist::DataParallelOptions dpo;
  dpo.rank = static_cast<int>(world.rank);
  dpo.world_size = static_cast<int>(world.world_size);
  dpo.master_addr = world.master_addr;
  dpo.master_port = world.master_port;
  auto millis = [&](const std::string& key) {
    const double s = config.GetFloat(key);
    if (!(s > 0))
      throw common::ConfigError("config", key, "must be > 0 (seconds)");
    return std::chrono::milliseconds(static_cast<int64_t>(s * 1000));
  };
  dpo.timeout = millis("DIST.TIMEOUT_SECONDS");
  dpo.barrier_timeout = millis("DIST.BARRIER_TIMEOUT_SECONDS");
  const double bucket_mb = config.GetFloat("DIST.BUCKET_SIZE_MB");
  if (!(bucket_mb > 0))
    throw common::ConfigError("config", "DIST.BUCKET_SIZE_MB", "must be > 0");
  dpo.bucket_bytes = static_cast<size_t>(bucket_mb * 1024 * 1024);
  if (const char* a = std::getenv("MRCNN_DIST_ADDR"); a != nullptr)
    dpo.listen_address = a;
  dist::DataParallel dp(dpo, device);
  // The processes of one node share its cores: each takes its share of intra-op threads
  // (torchrun sets OMP_NUM_THREADS=1 for the same reason) unless OMP_NUM_THREADS says
  // otherwise. Oversubscribed OpenMP spin-waits made 2 CPU ranks ~8x slower per step.
  const char* local_world = std::getenv("LOCAL_WORLD_SIZE");
  if (dp.active() && std::getenv("OMP_NUM_THREADS") == nullptr && local_world != nullptr &&
      std::atoi(local_world) > 1) {
    const int cores = static_cast<int>(std::thread::hardware_concurrency());
    torch::set_num_threads(std::max(1, cores / std::atoi(local_world)));
  }
  if (dp.active()) {
    // Every rank draws with rank 0's seed (a clock seed differs per process).
    std::vector<int64_t> shared_seed = {seed};
    dp.BroadcastFromRoot(shared_seed);
    seed = shared_seed[0];
  }
  model::ModelConfig mc = model::ModelConfig::FromYaml(config.ToYamlNode(), "resolved config");
  mc.Validate("resolved config");
  MetricsFile metrics(job.output_dir, world.rank == 0);

  // Datasets: the train channel (not for eval-only) and the first val/test channel.
  std::optional<DatasetSource> test_source;
  if (job.test_dir)
    test_source = ChannelSource(*job.test_dir, job.test_channel, config);
  std::shared_ptr<const data::CocoDataset> train_data;
  std::optional<DatasetSource> train_source;
  if (!job.eval_only) {
    train_source = ChannelSource(job.train_dir, job.train_channel, config);
    data::CocoLoadOptions opts;
    opts.drop_images_without_annotations = config.GetBool("DATALOADER.FILTER_EMPTY_ANNOTATIONS");
    opts.load_segmentation = mc.mask_on;
    train_data = std::make_shared<const data::CocoDataset>(
        data::CocoDataset::Load(train_source->layout.annotation_file, opts));
    const auto& rep = train_data->report();
    log.Line("[data] " + train_source->layout.annotation_file.string() + ": " +
             std::to_string(train_data->images().size()) + " images, " +
             std::to_string(train_data->annotations().size()) + " annotations, " +
             std::to_string(train_data->NumClasses()) + " classes; skipped " +
             std::to_string(rep.skipped_images) + " images, " +
             std::to_string(rep.skipped_annotations) + " annotations, dropped " +
             std::to_string(rep.dropped_empty_images) + " empty images");
    if (train_data->NumClasses() != mc.num_classes) {
      throw common::ConfigError("config", "MODEL.ROI_HEADS.NUM_CLASSES",
                                "is " + std::to_string(mc.num_classes) + " but " +
                                    train_source->layout.annotation_file.string() + " has " +
                                    std::to_string(train_data->NumClasses()) +
                                    " categories: set it to the dataset's category count");
    }
    if (train_data->images().empty()) {
      throw std::runtime_error(train_source->layout.annotation_file.string() +
                               ": no training image left");
    }
  }

  torch::manual_seed(static_cast<uint64_t>(seed));
  model::MaskRcnn net(mc);
  net->to(device);
  if (job.weights)
    LoadInitialWeights(net, *job.weights, log);

  std::vector<std::pair<std::string, at::Tensor>> named;
  for (const auto& p : net->named_parameters())
    named.emplace_back(p.key(), p.value());
  Sgd sgd(named, SgdOptions::FromConfig(config));

  const LrSchedule schedule = LrSchedule::FromConfig(config);
  const int64_t max_iter = config.GetInt("SOLVER.MAX_ITER");
  const int64_t accumulation = config.GetInt("SOLVER.ACCUMULATION_STEPS");
  if (accumulation < 1)
    throw common::ConfigError("config", "SOLVER.ACCUMULATION_STEPS", "must be >= 1");
  const int64_t ims_per_batch = config.GetInt("SOLVER.IMS_PER_BATCH");
  if (ims_per_batch % (world.world_size * accumulation) != 0) {
    throw common::ConfigError(
        "config", "SOLVER.IMS_PER_BATCH",
        "(" + std::to_string(ims_per_batch) + ") must be divisible by the number of processes (" +
            std::to_string(world.world_size) + ") times SOLVER.ACCUMULATION_STEPS (" +
            std::to_string(accumulation) + ")");
  }
  const int64_t micro_batch = ims_per_batch / (world.world_size * accumulation);

  const bool cuda = device.is_cuda();
  const bool amp = cuda && config.GetBool("SOLVER.AMP.ENABLED");
  const std::string amp_dtype_name = config.GetString("SOLVER.AMP.DTYPE");
  if (amp_dtype_name != "float16" && amp_dtype_name != "bfloat16") {
    throw common::ConfigError("config", "SOLVER.AMP.DTYPE",
                              "must be float16 or bfloat16, got \"" + amp_dtype_name + "\"");
  }
  const at::ScalarType amp_dtype = amp_dtype_name == "bfloat16" ? at::kBFloat16 : at::kHalf;
  GradScaler scaler(amp && amp_dtype == at::kHalf);

  const bool clip = config.GetBool("SOLVER.CLIP_GRADIENTS.ENABLED");
  const std::string clip_type = config.GetString("SOLVER.CLIP_GRADIENTS.CLIP_TYPE");
  if (clip && clip_type != "norm" && clip_type != "value") {
    throw common::ConfigError("config", "SOLVER.CLIP_GRADIENTS.CLIP_TYPE",
                              "must be norm or value, got \"" + clip_type + "\"");
  }
  TrainStepOptions step_options;
  if (amp)
    step_options.amp_dtype = amp_dtype;
  step_options.clip = clip;
  step_options.clip_type = clip_type;
  step_options.clip_value = config.GetFloat("SOLVER.CLIP_GRADIENTS.CLIP_VALUE");
  step_options.clip_norm_type = config.GetFloat("SOLVER.CLIP_GRADIENTS.NORM_TYPE");
  step_options.nonfinite_advice = "lower SOLVER.BASE_LR or enable gradient clipping";
  const int64_t log_period = std::max<int64_t>(1, config.GetInt("SOLVER.LOG_PERIOD"));
  const int64_t checkpoint_period = config.GetInt("SOLVER.CHECKPOINT_PERIOD");
  const int64_t eval_period = config.GetInt("TEST.EVAL_PERIOD");
  CheckpointDir checkpoints(
      job.checkpoint_dir,
      static_cast<int>(std::max<int64_t>(1, config.GetInt("SOLVER.CHECKPOINTS_TO_KEEP"))));

  // Resume: the newest valid checkpoint, unless `resume` is false.
  int64_t start_iter = 0;
  int64_t batches_consumed = 0;
  if (job.resume.value_or(true)) {
    auto loaded = checkpoints.LoadNewestValid(
        [&](const std::string& w) { log.Line("[checkpoint] warning: " + w); });
    if (!loaded && job.resume.value_or(false) && !job.eval_only) {
      throw common::ConfigError(
          job.checkpoint_dir.string(), "resume",
          "is true but there is no valid checkpoint: pass resume false to start fresh");
    }
    if (loaded) {
      model::TensorMap model_state;
      std::map<std::string, at::Tensor> optimizer_state, scaler_state, rng_state;
      for (auto& [name, value] : loaded->tensors) {
        if (name.rfind("model/", 0) == 0)
          model_state[name.substr(6)] = value;
        else if (name.rfind("optimizer/", 0) == 0)
          optimizer_state[name] = value;
        else if (name.rfind("scaler/", 0) == 0)
          scaler_state[name] = value;
        else if (name.rfind("rng/", 0) == 0)
          rng_state[name] = value;
      }
      model::LoadStateDict(*net, model_state, loaded->path.string());
      if (!job.eval_only) {
        sgd.LoadState(optimizer_state);
        scaler.LoadState(scaler_state);
        RestoreRngState(rng_state);
        start_iter = loaded->iteration;
        auto it = loaded->tensors.find("train/batches_consumed");
        if (it != loaded->tensors.end())
          batches_consumed = it->second.item<int64_t>();
        auto sit = loaded->tensors.find("train/seed");
        if (sit != loaded->tensors.end())
          seed = sit->second.item<int64_t>();
      }
      log.Line("[checkpoint] resumed from " + loaded->path.string() + " at iteration " +
               std::to_string(loaded->iteration));
    }
  }
  if (dp.active()) {
    // All ranks start from rank 0's state: weights and buffers (identical anyway when the
    // seed and MODEL.WEIGHTS are, but not when e.g. a checkpoint is visible to rank 0
    // only), momentum buffers and the resume position.
    std::vector<int64_t> position = {start_iter, batches_consumed, seed,
                                     static_cast<int64_t>(sgd.State().size())};
    const std::vector<int64_t> mine = position;
    dp.BroadcastFromRoot(position);
    if (position != mine) {
      throw std::runtime_error(
          "rank " + std::to_string(world.rank) + " would resume at iteration " +
          std::to_string(mine[0]) + " with " + std::to_string(mine[3]) +
          " momentum buffers, rank 0 at iteration " + std::to_string(position[0]) + " with " +
          std::to_string(position[3]) + ": every rank must see the same checkpoint directory (" +
          job.checkpoint_dir.string() + "); pass resume false to start fresh");
    }
    std::vector<at::Tensor> state;
    for (const auto& [name, value] : model::StateDict(*net))
      state.push_back(value);
    for (const auto& [name, value] : sgd.State())
      state.push_back(value);
    dp.BroadcastFromRoot(state);
  }
  log.Line("[train] device: " + device.str() + "  seed: " + std::to_string(seed) + "  processes: " +
           std::to_string(world.world_size) + " (gradient all-reduce: " + dp.gradient_backend() +
           ")  images/iter: " + std::to_string(ims_per_batch) + "  accumulation: " +
           std::to_string(accumulation) + "  amp: " + (amp ? amp_dtype_name : "off"));

  if (job.eval_only) {
    if (!test_source)
      throw common::ConfigError("config", "DATASETS.TEST", "eval-only needs a val or test channel");
    LogEval(log, metrics, start_iter, EvaluateChannel(net, *test_source, mc, config, device));
    return 0;
  }

  auto save_checkpoint = [&](int64_t iteration) {
    if (world.rank != 0)
      return;
    NamedTensors t;
    for (const auto& [name, value] : model::StateDict(*net))
      t["model/" + name] = value;
    for (const auto& [name, value] : sgd.State())
      t[name] = value;
    for (const auto& [name, value] : scaler.State())
      t[name] = value;
    for (const auto& [name, value] : CaptureRngState())
      t[name] = value;
    t["train/batches_consumed"] = torch::tensor(batches_consumed, torch::kInt64);
    t["train/seed"] = torch::tensor(seed, torch::kInt64);
    const fs::path file = checkpoints.Save(iteration, t);
    log.Line("[checkpoint] saved " + file.string());
  };

  data::LoaderOptions lo;
  lo.image_root = train_source->layout.image_dir;
  lo.batch_size = micro_batch;
  lo.num_workers = static_cast<int>(std::max<int64_t>(1, config.GetInt("DATALOADER.NUM_WORKERS")));
  lo.training = true;
  lo.group_by_aspect_ratio = config.GetBool("DATALOADER.ASPECT_RATIO_GROUPING");
  lo.transform.min_sizes.assign(mc.min_size_train.begin(), mc.min_size_train.end());
  lo.transform.max_size = mc.max_size_train;
  const std::string flip = config.GetString("INPUT.RANDOM_FLIP");
  if (flip != "none" && flip != "horizontal") {
    throw common::ConfigError("config", "INPUT.RANDOM_FLIP",
                              "must be none or horizontal, got \"" + flip + "\"");
  }
  lo.transform.flip_probability = flip == "horizontal" ? 0.5 : 0.0;
  lo.transform.training = true;
  lo.transform.with_masks = mc.mask_on;
  lo.normalization = NormalizationOf(mc);
  lo.size_divisibility = mc.size_divisibility;
  lo.rank = world.rank;
  lo.world_size = world.world_size;
  lo.seed = static_cast<uint64_t>(seed);
  data::DataLoader loader(train_data, lo);
  // The loader's batches are a function of the seed and their position, so skipping the
  // batches consumed before the checkpoint puts it exactly where it was.
  for (int64_t i = 0; i < batches_consumed; ++i)
    loader.Next();

  DumpWeightsIfAsked(net, world.rank, "initial");
  net->train();
  TrainStep step(*net, sgd, scaler, &dp, device, std::move(step_options));
  LogWindow window;
  const auto run_start = Clock::now();
  const int64_t run_start_iter = start_iter;
  bool stopped = false;
  int64_t iter = start_iter;
  for (; iter < max_iter; ++iter) {
    const auto t0 = Clock::now();
    const double lr = schedule.LrAt(iter);
    double data_time = 0;
    std::map<std::string, double> loss_values;
    double total_value = 0;
    for (int64_t micro = 0; micro < accumulation; ++micro) {
      const auto d0 = Clock::now();
      std::optional<data::Batch> batch = loader.Next();
      ++batches_consumed;
      data_time += Seconds(d0, Clock::now());
      model::ImageBatch ib = ToImageBatch(*batch, device);
      std::vector<model::ImageTarget> targets = ToTargets(*batch, device);
      std::vector<at::Generator> generators;
      for (const int64_t id : batch->image_ids) {
        generators.push_back(
            ImageSamplingGenerator(device, static_cast<uint64_t>(seed), iter, micro, id));
      }
      const MicroBatchLosses step_losses =
          step.ForwardBackward(ib, targets, std::move(generators), accumulation, iter + 1);
      for (const auto& [k, v] : step_losses.losses)
        loss_values[k] += v / static_cast<double>(accumulation);
      total_value += step_losses.total / static_cast<double>(accumulation);
    }
    step.Finish(lr);
    // The losses logged are the mean over the ranks; the stop request (SIGTERM reaches
    // the ranks at slightly different times) is agreed here, so all save at one iteration.
    bool stop = g_stop.load();
    if (dp.active()) {
      std::vector<double> shared;
      for (const auto& [k, v] : loss_values)
        shared.push_back(v);
      shared.push_back(total_value);
      shared.push_back(stop ? 1.0 : 0.0);
      dp.SumInPlace(shared);
      size_t i = 0;
      const double w = static_cast<double>(world.world_size);
      for (auto& [k, v] : loss_values)
        v = shared[i++] / w;
      total_value = shared[i++] / w;
      stop = shared[i] > 0;
    }
    const double iter_time = Seconds(t0, Clock::now());

    for (const auto& [k, v] : loss_values)
      window.losses[k] += v;
    window.total += total_value;
    window.iter_time += iter_time;
    window.data_time += data_time;
    ++window.count;
    const int64_t done = iter + 1;
    if (done % log_period == 0 || done == max_iter) {
      TrainLogEntry e;
      e.iteration = done;
      e.max_iter = max_iter;
      const double n = static_cast<double>(window.count);
      for (const auto& [k, v] : window.losses)
        e.losses[k] = v / n;
      e.total_loss = window.total / n;
      e.lr = lr;
      e.iter_time = window.iter_time / n;
      e.data_time = window.data_time / n;
      e.images_per_sec = static_cast<double>(ims_per_batch) / e.iter_time;
      const double elapsed_per_iter =
          Seconds(run_start, Clock::now()) / static_cast<double>(done - run_start_iter);
      e.eta_seconds = elapsed_per_iter * static_cast<double>(max_iter - done);
      e.max_mem_mb = PeakMemoryMb(device);
      log.Line(FormatTrainLine(e));
      metrics.Write(TrainLogJson(e));
      window.Clear();
    }
    if (stop || (checkpoint_period > 0 && done % checkpoint_period == 0 && done != max_iter)) {
      save_checkpoint(done);
      dp.Barrier();  // the others wait while rank 0 writes
    }
    if (stop) {
      log.Line("[train] stop requested: saved iteration " + std::to_string(done) + ", exiting");
      stopped = true;
      ++iter;
      break;
    }
    if (eval_period > 0 && done % eval_period == 0 && done != max_iter && test_source &&
        world.rank == 0) {
      LogEval(log, metrics, done, EvaluateChannel(net, *test_source, mc, config, device));
    }
    if (eval_period > 0 && done % eval_period == 0 && done != max_iter && test_source)
      dp.Barrier();  // the others wait while rank 0 evaluates
  }
  DumpWeightsIfAsked(net, world.rank, "final");
  if (stopped)
    return 0;
  if (start_iter < max_iter)
    save_checkpoint(max_iter);
  log.Line("[train] done: " + std::to_string(max_iter) + " iterations in " +
           FormatDuration(Seconds(run_start, Clock::now())) + " (this run)");
  if (world.rank == 0) {
    if (test_source)
      LogEval(log, metrics, max_iter, EvaluateChannel(net, *test_source, mc, config, device));
    WriteModelDir(net, config, *train_data, job.model_dir);
    log.Line("[model] wrote " + job.model_dir.string() +
             " (model.safetensors, config.yaml, classes.json)");
  }
  dp.Barrier();  // the job ends when rank 0's checkpoint, evaluation and model dir are done
  return 0;
}

}  // namespace mrcnn::engine
