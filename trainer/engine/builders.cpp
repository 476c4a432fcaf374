#include "trainer/engine/builders.h"

#include <torch/torch.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/config_error.h"
#include "trainer/data/coco_dataset.h"
#include "trainer/data/data_loader.h"
#include "trainer/data/keypoint_flip.h"
#include "trainer/engine/config/input_crop.h"
#include "trainer/engine/cuda_graphs/cuda_graphed_feature_stage.h"
#include "trainer/engine/distributed/data_parallel.h"
#include "trainer/engine/model_inputs.h"
#include "trainer/model/safetensors.h"
#include "trainer/model/weights/weights_import.h"

namespace mrcnn::engine {
namespace fs = std::filesystem;

c10::Device BuildDevice(const TrainConfig& config, int64_t local_rank) {
  const std::string& name = config.GetString("MODEL.DEVICE");
  if (name == "cpu")
    return c10::Device(c10::kCPU);
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
    return c10::Device(c10::kCPU);
  const int64_t count = static_cast<int64_t>(torch::cuda::device_count());
  return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(local_rank % count));
}

std::unique_ptr<dist::DataParallel> BuildDataParallel(const TrainConfig& config,
                                                      const ProcessWorld& world,
                                                      const c10::Device& device) {
  dist::DataParallelOptions o;
  o.rank = static_cast<int>(world.rank);
  o.world_size = static_cast<int>(world.world_size);
  o.master_addr = world.master_addr;
  o.master_port = world.master_port;
  o.agent_store_prefix = world.agent_store_prefix;
  o.description = "local rank " + std::to_string(world.local_rank) + " on " + world.host;
  auto millis = [&](const std::string& key) {
    const double s = config.GetFloat(key);
    if (!(s > 0))
      throw common::ConfigError("config", key, "must be > 0 (seconds)");
    return std::chrono::milliseconds(static_cast<int64_t>(s * 1000));
  };
  o.timeout = millis("DIST.TIMEOUT_SECONDS");
  o.barrier_timeout = millis("DIST.BARRIER_TIMEOUT_SECONDS");
  const double bucket_mb = config.GetFloat("DIST.BUCKET_SIZE_MB");
  if (!(bucket_mb > 0))
    throw common::ConfigError("config", "DIST.BUCKET_SIZE_MB", "must be > 0");
  o.bucket_bytes = static_cast<size_t>(bucket_mb * 1024 * 1024);
  if (const char* a = std::getenv("MRCNN_DIST_ADDR"); a != nullptr)
    o.listen_address = a;
  o.overlap_backward = config.GetBool("DIST.OVERLAP_BACKWARD");
  if (const char* b = std::getenv("MRCNN_BENCH_OVERLAP_ALTERNATE"); b != nullptr)
    o.overlap_every_other_iteration = std::string(b) == "1";
  // Tests and people checking the launch order: one file per rank, first iteration only.
  if (const char* d = std::getenv("MRCNN_BUCKET_TRACE_DIR"); d != nullptr && *d != '\0') {
    o.bucket_trace_path = std::string(d);
    o.bucket_trace_path.append("/bucket_trace_rank")
        .append(std::to_string(world.rank))
        .append(".txt");
  }
  auto dp = std::make_unique<dist::DataParallel>(o, device);
  // The processes of one node share its cores (torchrun sets OMP_NUM_THREADS=1 for the
  // same reason): oversubscribed OpenMP spin-waits made 2 CPU ranks ~8x slower per step.
  const char* local_world = std::getenv("LOCAL_WORLD_SIZE");
  if (dp->active() && std::getenv("OMP_NUM_THREADS") == nullptr && local_world != nullptr &&
      std::atoi(local_world) > 1) {
    const int cores = static_cast<int>(std::thread::hardware_concurrency());
    torch::set_num_threads(std::max(1, cores / std::atoi(local_world)));
  }
  return dp;
}

int64_t BuildSeed(const TrainConfig& config, dist::DataParallel& dp) {
  int64_t seed = config.GetInt("SEED");
  if (seed < 0)
    seed = std::chrono::system_clock::now().time_since_epoch().count() & 0x7fffffff;
  if (dp.active()) {
    std::vector<int64_t> shared = {seed};  // a clock seed differs per process
    dp.BroadcastFromRoot(shared);
    seed = shared[0];
  }
  return seed;
}

model::ModelConfig BuildModelConfig(const TrainConfig& config) {
  model::ModelConfig mc = model::ModelConfig::FromYaml(config.ToYamlNode(), "resolved config");
  mc.Validate("resolved config");
  return mc;
}

namespace {

std::string ShapeText(const torch::Tensor& t) {
  std::string text = "[";
  for (int64_t i = 0; i < t.dim(); ++i) {
    text.append(i == 0 ? "" : ", ").append(std::to_string(t.size(i)));
  }
  return text.append("]");
}

// "a, b, c and 4 more": names in a log line without flooding it.
std::string SomeNames(const std::vector<std::string>& names, size_t shown) {
  std::string text;
  for (size_t i = 0; i < names.size() && i < shown; ++i) {
    text.append(i == 0 ? "" : ", ").append(names[i]);
  }
  if (names.size() > shown) {
    text.append(" and ").append(std::to_string(names.size() - shown)).append(" more");
  }
  return text;
}

// The module a tensor belongs to, two levels deep: "roi_heads.box_predictor.cls_score.weight"
// -> "roi_heads.box_predictor".
std::string ModuleOf(const std::string& name) {
  const size_t first = name.find('.');
  const size_t second = first == std::string::npos ? first : name.find('.', first + 1);
  return second == std::string::npos ? name : name.substr(0, second);
}

}  // namespace

WeightsLoad LoadWeightsByName(model::MetaArchitecture& net, const fs::path& file) {
  model::TensorMap tensors;
  try {
    tensors = model::ReadSafetensors(file);
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string(e.what()) +
                             "; this weights file (MODEL.WEIGHTS, or the weights channel's only "
                             "*.safetensors) is damaged: replace it");
  }
  // Safetensors has no checksum; NaN or infinite weights are the one sign of damaged
  // values that can be checked (they would only surface later as a NaN loss).
  for (const auto& [name, value] : tensors) {
    if (value.is_floating_point() && !torch::isfinite(value).all().item<bool>()) {
      throw common::ConfigError(file.string(), "MODEL.WEIGHTS",
                                "is corrupt: tensor '" + name +
                                    "' holds NaN or infinite values; replace the file (the "
                                    "weights channel's model.safetensors or MODEL.WEIGHTS)");
    }
  }
  model::TensorMap state = model::StateDict(net);
  WeightsLoad load;
  torch::NoGradGuard no_grad;
  for (const auto& [name, value] : tensors) {
    auto it = state.find(name);
    if (it == state.end()) {
      load.not_in_model.push_back(name);
    } else if (it->second.sizes() != value.sizes()) {
      load.shape_differs.push_back(name + ": file " + ShapeText(value) + " vs model " +
                                   ShapeText(it->second));
    } else {
      it->second.copy_(value.to(it->second.dtype()));
      load.loaded.push_back(name);
    }
  }
  if (load.loaded.empty()) {
    throw common::ConfigError(
        file.string(), "MODEL.WEIGHTS",
        "has no tensor named like the model's (torchvision state_dict keys, e.g. "
        "backbone.body.conv1.weight): convert it with scripts/convert_weights.py");
  }
  for (const auto& [name, value] : state) {
    if (!tensors.contains(name))
      load.left_initialised.push_back(name);
  }
  return load;
}

std::vector<std::string> DescribeWeightsLoad(const WeightsLoad& load, const fs::path& file) {
  const size_t total =
      load.loaded.size() + load.shape_differs.size() + load.left_initialised.size();
  std::vector<std::string> lines = {"[weights] loaded " + std::to_string(load.loaded.size()) +
                                    " of the model's " + std::to_string(total) + " tensors from " +
                                    file.string()};
  if (!load.left_initialised.empty()) {
    // Module -> count; names are sorted, so a module's tensors are contiguous.
    std::vector<std::pair<std::string, size_t>> modules;
    for (const auto& name : load.left_initialised) {
      const std::string module = ModuleOf(name);
      if (modules.empty() || modules.back().first != module) {
        modules.emplace_back(module, 0);
      }
      ++modules.back().second;
    }
    std::string text;
    for (const auto& [module, count] : modules) {
      text.append(text.empty() ? "" : ", ")
          .append(module)
          .append(": ")
          .append(std::to_string(count));
    }
    lines.push_back("[weights] left at initialisation (not in the file): " +
                    std::to_string(load.left_initialised.size()) + " tensors: " + text);
  }
  if (!load.shape_differs.empty()) {
    lines.push_back("[weights] skipped, shape differs (kept initialised): " +
                    SomeNames(load.shape_differs, 5));
  }
  if (!load.not_in_model.empty()) {
    lines.push_back(
        "[weights] skipped, not in the model: " + std::to_string(load.not_in_model.size()) +
        " tensors: " + SomeNames(load.not_in_model, 8));
  }
  return lines;
}

bool IsDetectron2Checkpoint(const fs::path& file) {
  const std::string ext = file.extension().string();
  return ext == ".pth" || ext == ".pkl";
}

std::shared_ptr<model::MetaArchitecture> BuildModel(const model::ModelConfig& mc,
                                                    const c10::Device& device,
                                                    const std::optional<fs::path>& weights,
                                                    const ConsoleLog& log) {
  std::shared_ptr<model::MetaArchitecture> net = model::BuildModel(mc);
  net->to(device);
  if (weights && IsDetectron2Checkpoint(*weights)) {
    // Detectron2's .pth / the zoo's .pkl (Caffe2 names included): mapped onto our names,
    // tensors that do not fit skipped with a line each, as DetectionCheckpointer does.
    std::ostringstream lines;
    try {
      model::weights::ImportDetectron2Weights(*weights, *net, lines);
    } catch (const std::runtime_error& e) {
      throw common::ConfigError(weights->string(), "MODEL.WEIGHTS", e.what());
    }
    std::istringstream in(lines.str());
    for (std::string line; std::getline(in, line);)
      log.Line(line);
  } else if (weights) {
    for (const auto& line : DescribeWeightsLoad(LoadWeightsByName(*net, *weights), *weights)) {
      log.Line(line);
    }
  }
  return net;
}

NamedParameters ParametersOf(model::MetaArchitecture& net) {
  NamedParameters named;
  for (const auto& p : net.named_parameters())
    named.emplace_back(p.key(), p.value());
  return named;
}

LrSchedule BuildLrSchedule(const TrainConfig& config) {
  return LrSchedule::FromConfig(config);
}

StepPlan BuildStepPlan(const TrainConfig& config, int64_t world_size) {
  StepPlan plan;
  plan.max_iter = config.GetInt("SOLVER.MAX_ITER");
  plan.accumulation = config.GetInt("SOLVER.ACCUMULATION_STEPS");
  if (plan.accumulation < 1)
    throw common::ConfigError("config", "SOLVER.ACCUMULATION_STEPS", "must be >= 1");
  plan.images_per_iteration = config.GetInt("SOLVER.IMS_PER_BATCH");
  if (plan.images_per_iteration % (world_size * plan.accumulation) != 0) {
    throw common::ConfigError(
        "config", "SOLVER.IMS_PER_BATCH",
        "(" + std::to_string(plan.images_per_iteration) +
            ") must be divisible by the number of processes (" + std::to_string(world_size) +
            ") times SOLVER.ACCUMULATION_STEPS (" + std::to_string(plan.accumulation) + ")");
  }
  plan.micro_batch = plan.images_per_iteration / (world_size * plan.accumulation);
  return plan;
}

std::optional<at::ScalarType> BuildAmpDtype(const TrainConfig& config, const c10::Device& device) {
  const std::string& name = config.GetString("SOLVER.AMP.DTYPE");
  if (name != "float16" && name != "bfloat16") {
    throw common::ConfigError("config", "SOLVER.AMP.DTYPE",
                              "must be float16 or bfloat16, got \"" + name + "\"");
  }
  if (!config.GetBool("SOLVER.AMP.ENABLED"))
    return std::nullopt;
  // On a CPU, LibTorch autocasts to bfloat16 (what CPUs with AMX/AVX-512 BF16 speed up);
  // float16 there has few fast kernels, so a float16 config trains in float32 on a CPU.
  if (!device.is_cuda() && name != "bfloat16")
    return std::nullopt;
  return name == "bfloat16" ? at::kBFloat16 : at::kHalf;
}

GradScaler BuildGradScaler(const TrainConfig& config, const c10::Device& device) {
  return GradScaler(BuildAmpDtype(config, device) == at::kHalf);
}

std::vector<std::array<int64_t, 2>> BuildGraphShapes(const TrainConfig& config) {
  const char* key = "SOLVER.CUDA_GRAPHS.SHAPES";
  const int64_t divisibility = config.GetInt("INPUT.SIZE_DIVISIBILITY");
  const auto& listed = config.GetFloatListList(key);
  if (listed.empty())
    throw common::ConfigError("config", key, "must list at least one [height, width]");
  std::vector<std::array<int64_t, 2>> shapes;
  for (const auto& shape : listed) {
    const bool integral =
        shape.size() == 2 && std::all_of(shape.begin(), shape.end(), [](double v) {
          return v >= 1 && v <= 1e5 && v == static_cast<double>(static_cast<int64_t>(v));
        });
    if (!integral) {
      throw common::ConfigError("config", key,
                                "each entry must be [height, width], two positive integers, got " +
                                    std::to_string(shape.size()) + " value(s) or a non-integer");
    }
    const std::array<int64_t, 2> hw{static_cast<int64_t>(shape[0]), static_cast<int64_t>(shape[1])};
    if (hw[0] % divisibility != 0 || hw[1] % divisibility != 0) {
      throw common::ConfigError(
          "config", key,
          "[" + std::to_string(hw[0]) + ", " + std::to_string(hw[1]) +
              "] must be multiples of INPUT.SIZE_DIVISIBILITY (" + std::to_string(divisibility) +
              "): batches are padded to that multiple, so no batch would ever fit it exactly");
    }
    shapes.push_back(hw);
  }
  return shapes;
}

TrainStepOptions BuildTrainStepOptions(const TrainConfig& config, const c10::Device& device,
                                       int64_t micro_batch) {
  TrainStepOptions o;
  const std::vector<std::array<int64_t, 2>> graph_shapes = BuildGraphShapes(config);
  if (config.GetBool("SOLVER.CUDA_GRAPHS.ENABLED")) {
    if (!device.is_cuda()) {
      throw common::ConfigError("config", "SOLVER.CUDA_GRAPHS.ENABLED",
                                "needs CUDA, and this job runs on " + device.str() +
                                    ": set it to false, or train on a GPU");
    }
    if (!CudaGraphsCompiled()) {
      throw common::ConfigError("config", "SOLVER.CUDA_GRAPHS.ENABLED",
                                "needs a build with CUDA (this one was built with MRCNN_CUDA=OFF)");
    }
    o.graph_shapes = graph_shapes;
    o.graph_batch = micro_batch;
  }
  o.amp_dtype = BuildAmpDtype(config, device);
  o.amp_device_type = device.type();
  o.clip = config.GetBool("SOLVER.CLIP_GRADIENTS.ENABLED");
  o.clip_type = config.GetString("SOLVER.CLIP_GRADIENTS.CLIP_TYPE");
  if (o.clip && o.clip_type != "norm" && o.clip_type != "value" && o.clip_type != "full_model") {
    throw common::ConfigError("config", "SOLVER.CLIP_GRADIENTS.CLIP_TYPE",
                              "must be value, norm (each parameter, Detectron2's) or full_model (the "
                              "norm of all gradients together), got \"" + o.clip_type + "\"");
  }
  o.clip_value = config.GetFloat("SOLVER.CLIP_GRADIENTS.CLIP_VALUE");
  o.clip_norm_type = config.GetFloat("SOLVER.CLIP_GRADIENTS.NORM_TYPE");
  o.nonfinite_advice = "lower SOLVER.BASE_LR or enable gradient clipping";
  return o;
}

namespace {

DatasetSource ChannelSource(const fs::path& dir, const std::string& channel,
                            const TrainConfig& config) {
  return {ResolveChannelLayout(dir, channel, config.GetString("DATASETS.ANNOTATION_FILE"),
                               config.GetString("DATASETS.IMAGE_DIR")),
          channel};
}

}  // namespace

namespace {

// A keypoint model needs keypoints in its training data, as many per instance as its head
// predicts, and one set of names for the flips.
void CheckKeypointData(const data::CocoDataset& ds, const model::ModelConfig& mc,
                       const fs::path& file, const ConsoleLog& log) {
  std::vector<std::string> names;
  try {
    names = data::DatasetKeypointNames(ds.categories());
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(file.string() + ": " + e.what());
  }
  int64_t with_keypoints = 0, visible = 0;
  for (const data::CocoAnnotation& a : ds.annotations()) {
    if (a.keypoints.empty())
      continue;
    ++with_keypoints;
    if (a.keypoints.size() != 3 * static_cast<size_t>(mc.num_keypoints)) {
      throw common::ConfigError("config", "MODEL.ROI_KEYPOINT_HEAD.NUM_KEYPOINTS",
                                "is " + std::to_string(mc.num_keypoints) + " but annotation " +
                                    std::to_string(a.id) + " of " + file.string() + " has " +
                                    std::to_string(a.keypoints.size() / 3) +
                                    " keypoints: set it to the dataset's keypoint count");
    }
    for (size_t k = 2; k < a.keypoints.size(); k += 3)
      visible += a.keypoints[k] > 0 ? 1 : 0;
  }
  if (with_keypoints == 0) {
    throw common::ConfigError("config", "MODEL.KEYPOINT_ON",
                              "is true but no annotation of " + file.string() +
                                  " has \"keypoints\": train a keypoint model on keypoint data "
                                  "(trainer make-shapes --keypoints makes some)");
  }
  if (names.empty()) {
    log.Line("[data] " + file.string() +
             ": no category names its keypoints; horizontal flips keep the keypoints' order "
             "(left and right are not swapped)");
  }
  log.Line("[data] keypoints: " + std::to_string(with_keypoints) + " annotations with " +
           std::to_string(mc.num_keypoints) + " keypoints, " + std::to_string(visible) +
           " labelled points");
}

}  // namespace

TrainData BuildTrainData(const TrainJob& job, const model::ModelConfig& mc, const ConsoleLog& log) {
  TrainData train{ChannelSource(job.train_dir, job.train_channel, job.config), nullptr};
  const fs::path& file = train.source.layout.annotation_file;
  data::CocoLoadOptions opts;
  opts.drop_images_without_annotations = job.config.GetBool("DATALOADER.FILTER_EMPTY_ANNOTATIONS");
  opts.load_segmentation = mc.mask_on;
  if (mc.keypoint_on)
    opts.min_keypoints_per_image = mc.min_keypoints_per_image;
  train.dataset = std::make_shared<const data::CocoDataset>(data::CocoDataset::Load(file, opts));
  const data::CocoDataset& ds = *train.dataset;
  const auto& rep = ds.report();
  log.Line("[data] " + file.string() + ": " + std::to_string(ds.images().size()) + " images, " +
           std::to_string(ds.annotations().size()) + " annotations, " +
           std::to_string(ds.NumClasses()) + " classes; skipped " +
           std::to_string(rep.skipped_images) + " images, " +
           std::to_string(rep.skipped_annotations) + " annotations, dropped " +
           std::to_string(rep.dropped_empty_images) + " empty images" +
           (mc.keypoint_on ? ", " + std::to_string(rep.dropped_few_keypoint_images) +
                                 " images with fewer than " +
                                 std::to_string(mc.min_keypoints_per_image) + " labelled keypoints"
                           : std::string()));
  if (ds.NumClasses() != mc.num_classes) {
    throw common::ConfigError(
        "config", mc.retinanet() ? "MODEL.RETINANET.NUM_CLASSES" : "MODEL.ROI_HEADS.NUM_CLASSES",
        "is " + std::to_string(mc.num_classes) + " but " + file.string() + " has " +
            std::to_string(ds.NumClasses()) +
            " categories: set it to the dataset's category count");
  }
  if (ds.images().empty())
    throw std::runtime_error(file.string() + ": no training image left");
  if (mc.keypoint_on)
    CheckKeypointData(ds, mc, file, log);
  return train;
}

std::optional<DatasetSource> BuildTestSource(const TrainJob& job) {
  if (!job.test_dir)
    return std::nullopt;
  return ChannelSource(*job.test_dir, job.test_channel, job.config);
}

std::unique_ptr<data::DataLoader> BuildTrainLoader(const TrainConfig& config,
                                                   const model::ModelConfig& mc,
                                                   const TrainData& train,
                                                   const ProcessWorld& world, const StepPlan& plan,
                                                   int64_t seed, int64_t batches_consumed) {
  data::LoaderOptions lo;
  lo.image_root = train.source.layout.image_dir;
  lo.batch_size = plan.micro_batch;
  lo.num_workers = static_cast<int>(std::max<int64_t>(1, config.GetInt("DATALOADER.NUM_WORKERS")));
  lo.training = true;
  lo.group_by_aspect_ratio = config.GetBool("DATALOADER.ASPECT_RATIO_GROUPING");
  lo.transform.min_sizes.assign(mc.min_size_train.begin(), mc.min_size_train.end());
  lo.transform.max_size = mc.max_size_train;
  lo.transform.sampling = mc.min_size_train_sampling == "range" ? data::SizeSampling::kRange
                                                                : data::SizeSampling::kChoice;
  lo.transform.filter = ResizeFilterOf(mc);
  const std::string& flip = config.GetString("INPUT.RANDOM_FLIP");
  if (flip != "none" && flip != "horizontal") {
    throw common::ConfigError("config", "INPUT.RANDOM_FLIP",
                              "must be none or horizontal, got \"" + flip + "\"");
  }
  lo.transform.flip_probability = flip == "horizontal" ? 0.5 : 0.0;
  lo.transform.training = true;
  lo.transform.with_masks = mc.mask_on;
  lo.transform.crop = InputCropOf(config);
  if (mc.keypoint_on)
    lo.transform.keypoint_flip =
        data::KeypointFlipIndices(data::DatasetKeypointNames(train.dataset->categories()));
  lo.normalization = NormalizationOf(mc);
  lo.size_divisibility = mc.size_divisibility;
  lo.rank = world.rank;
  lo.world_size = world.world_size;
  lo.seed = static_cast<uint64_t>(seed);
  auto loader = std::make_unique<data::DataLoader>(train.dataset, lo);
  for (int64_t i = 0; i < batches_consumed; ++i)
    loader->Next();
  return loader;
}

CheckpointDir BuildCheckpointDir(const TrainJob& job) {
  return CheckpointDir(
      job.checkpoint_dir,
      static_cast<int>(std::max<int64_t>(1, job.config.GetInt("SOLVER.CHECKPOINTS_TO_KEEP"))));
}

}  // namespace mrcnn::engine
