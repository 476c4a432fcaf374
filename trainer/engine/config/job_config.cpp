#include "trainer/engine/config/job_config.h"

#include <algorithm>
#include <cctype>

#include "common/checkpoint_config.h"
#include "common/config_error.h"
#include "common/input_data_config.h"
#include "common/json_file.h"
#include "common/resource_config.h"
#include "download/weights_cache.h"
#include "download/zoo_url.h"
#include "trainer/engine/config/input_crop.h"
#include "trainer/engine/config/model_zoo.h"

namespace mrcnn::engine {
namespace {

using common::ConfigError;
namespace fs = std::filesystem;

constexpr const char* kArgsSource = "hyperparameters";

std::string NormaliseKey(std::string key) {
  std::replace(key.begin(), key.end(), '_', '-');
  std::transform(key.begin(), key.end(), key.begin(), [](unsigned char c) { return std::tolower(c); });
  return key;
}

bool ParseBoolArg(const std::string& key, const std::string& value) {
  std::string v = value;
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::tolower(c); });
  if (v == "true" || v == "1") return true;
  if (v == "false" || v == "0") return false;
  throw ConfigError(kArgsSource, key, "must be true or false, got \"" + value + "\"");
}

// What SageMaker says about how it delivers the channels: the trainer reads a channel as one
// directory holding the COCO file and every image it names, which two settings do not give.
struct ChannelDelivery {
  fs::path input_data_config;             // <base>/input/config/inputdataconfig.json
  std::vector<common::Channel> declared;  // empty when that file is absent
  size_t hosts = 1;                       // resourceconfig.json's hosts
};

ChannelDelivery ReadChannelDelivery(const common::JobPaths& paths) {
  ChannelDelivery delivery;
  delivery.input_data_config = paths.input_config / "inputdataconfig.json";
  std::error_code ec;
  if (fs::exists(delivery.input_data_config, ec)) {
    delivery.declared = common::ParseInputDataConfig(delivery.input_data_config, paths.input_data);
  }
  delivery.hosts =
      common::ParseResourceConfig(paths.input_config / "resourceconfig.json").hosts.size();
  return delivery;
}

// Throws when `name` comes in a form the trainer cannot read. `dir` is where the channel's
// directory is expected (SM_CHANNEL_<NAME>, else <base>/input/data/<name>).
void CheckChannelDelivery(const std::string& name, const fs::path& dir,
                          const ChannelDelivery& delivery) {
  const std::string file = delivery.input_data_config.string();
  const auto declared = std::find_if(delivery.declared.begin(), delivery.declared.end(),
                                     [&](const common::Channel& ch) { return ch.name == name; });
  const std::string pipe_advice =
      ": Pipe mode is not supported (it streams the channel through FIFOs " + dir.string() +
      "_0, " + dir.string() +
      "_1, ... and the trainer reads a directory); use \"File\" or "
      "\"FastFile\" (the estimator's input_mode, or TrainingInput(..., input_mode=\"File\"))";
  if (declared != delivery.declared.end() && declared->mode == common::InputMode::kPipe) {
    throw ConfigError(file, name + ".TrainingInputMode",
                      "is \"Pipe\" for channel \"" + name + "\"" + pipe_advice);
  }
  std::error_code ec;
  if (!fs::exists(dir, ec) && fs::is_fifo(dir.string() + "_0", ec)) {
    throw ConfigError(file, name + ".TrainingInputMode",
                      "looks like \"Pipe\" for channel \"" + name + "\" (" + dir.string() +
                          "_0 is a FIFO and " + dir.string() + " does not exist)" + pipe_advice);
  }
  if (declared != delivery.declared.end() && declared->s3_distribution_type == "ShardedByS3Key" &&
      delivery.hosts > 1) {
    throw ConfigError(
        file, name + ".S3DistributionType",
        "is \"ShardedByS3Key\" for channel \"" + name + "\" on " + std::to_string(delivery.hosts) +
            " hosts: each host gets only some of the channel's S3 objects, so the COCO annotation "
            "file lands on one host and the images it names are spread over all of them; use "
            "\"FullyReplicated\" (TrainingInput(..., distribution=\"FullyReplicated\"))");
  }
}

std::optional<fs::path> Channel(const std::string& name, const common::EnvMap& env,
                                const common::JobPaths& paths, const ChannelDelivery& delivery) {
  std::string upper = name;
  std::transform(upper.begin(), upper.end(), upper.begin(),
                 [](unsigned char c) { return std::toupper(c); });
  fs::path dir = paths.input_data / name;
  if (auto v = common::Lookup(env, "SM_CHANNEL_" + upper); v && !v->empty())
    dir = *v;
  CheckChannelDelivery(name, dir, delivery);
  if (fs::exists(dir)) return dir;
  return std::nullopt;
}

fs::path EnvPathOr(const common::EnvMap& env, const std::string& key, const fs::path& fallback) {
  auto v = common::Lookup(env, key);
  return v && !v->empty() ? fs::path(*v) : fallback;
}

}  // namespace

TrainJobArgs ParseTrainJobArgs(const std::vector<std::string>& argv) {
  static const std::vector<std::string> kKeys = {"base-dir", "config-file", "eval-only",
                                                 "local-config-file", "opts", "resume"};
  TrainJobArgs args;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& token = argv[i];
    if (token.rfind("--", 0) != 0) {
      throw ConfigError(kArgsSource, token, "is not a --key (arguments are --key value pairs)");
    }
    std::string key = token.substr(2);
    std::string value;
    if (auto eq = key.find('='); eq != std::string::npos) {
      value = key.substr(eq + 1);
      key = key.substr(0, eq);
    } else {
      if (i + 1 >= argv.size()) throw ConfigError(kArgsSource, key, "has no value");
      value = argv[++i];
    }
    const std::string k = NormaliseKey(key);
    if (k == "config-file") {
      args.config_file = value;
    } else if (k == "local-config-file") {
      args.local_config_file = value;
    } else if (k == "opts") {
      args.opts = value;
    } else if (k == "resume") {
      args.resume = ParseBoolArg(key, value);
    } else if (k == "eval-only") {
      args.eval_only = ParseBoolArg(key, value);
    } else if (k == "base-dir") {
      args.base_dir = value;
    } else {
      throw ConfigError(kArgsSource, key,
                        "is not a hyperparameter of this trainer; did you mean \"" + ClosestKey(k, kKeys) + "\"?");
    }
  }
  return args;
}

fs::path ConfigDir(const common::EnvMap& env, const fs::path& executable) {
  if (auto v = common::Lookup(env, "MRCNN_CONFIG_DIR"); v && !v->empty()) return *v;
  if (!executable.empty()) {
    std::error_code ec;
    fs::path exe = fs::weakly_canonical(executable, ec);
    if (!ec) {
      fs::path beside = exe.parent_path().parent_path().parent_path() / "configs";
      if (fs::is_directory(beside)) return beside;
    }
  }
  return "/opt/mrcnn/configs";
}

namespace {

// The checkpoint files a weights channel may hold: ours (.safetensors) and Detectron2's
// (.pth from DetectionCheckpointer, .pkl from its model zoo).
bool IsCheckpointFile(const fs::path& p) {
  const std::string ext = p.extension().string();
  return ext == ".safetensors" || ext == ".pth" || ext == ".pkl";
}

std::vector<fs::path> CheckpointFilesIn(const std::optional<fs::path>& weights_channel) {
  std::vector<fs::path> found;
  if (weights_channel) {
    for (const auto& entry : fs::directory_iterator(*weights_channel)) {
      if (entry.is_regular_file() && IsCheckpointFile(entry.path())) found.push_back(entry.path());
    }
    std::sort(found.begin(), found.end());
  }
  return found;
}

// A URL's weights: the channel's copy first (the file of that name, else its one checkpoint
// file), else the cache file the URL is fetched into.
WeightsChoice WeightsOfUrl(const std::string& weights_key, const std::vector<fs::path>& found,
                           const fs::path& cache_dir, const std::string& mirror) {
  try {
    const std::string canonical = *download::WeightsUrl(weights_key, "");
    const std::string name = fs::path(canonical.substr(0, canonical.find('?'))).filename().string();
    for (const fs::path& file : found) {
      if (file.filename() == name) return {file, ""};
    }
    if (found.size() == 1) return {found.front(), ""};
    return {download::CachePathOf(cache_dir, canonical), *download::WeightsUrl(weights_key, mirror)};
  } catch (const std::invalid_argument& e) {
    throw ConfigError("config", "MODEL.WEIGHTS",
                      "names " + weights_key + ": " + e.what() +
                          "; put the checkpoint in the weights channel, or set MODEL.WEIGHTS to "
                          "\"\" to train from scratch");
  }
}

}  // namespace

WeightsChoice ResolveWeights(const std::string& weights_key, const std::optional<fs::path>& weights_channel,
                             const fs::path& cache_dir, const std::string& mirror) {
  const std::vector<fs::path> found = CheckpointFilesIn(weights_channel);
  const bool is_url = [&] {
    try {
      return download::WeightsUrl(weights_key, "").has_value();
    } catch (const std::invalid_argument&) {
      return true;  // gs:// and unknown catalog names: WeightsOfUrl says why
    }
  }();
  if (is_url) return WeightsOfUrl(weights_key, found, cache_dir, mirror);
  if (!weights_key.empty()) {
    fs::path p = weights_key;
    if (p.is_absolute()) return {p, ""};
    if (!weights_channel) {
      throw ConfigError("config", "MODEL.WEIGHTS",
                        "is a relative path (\"" + weights_key +
                            "\") but there is no weights channel; give an absolute path or a weights channel");
    }
    return {*weights_channel / p, ""};
  }
  if (found.size() == 1) return {found.front(), ""};
  if (found.empty()) return {};
  throw ConfigError(weights_channel->string(), "MODEL.WEIGHTS",
                    "is empty and the weights channel holds " + std::to_string(found.size()) +
                        " checkpoint files (.safetensors, .pth, .pkl); name one with MODEL.WEIGHTS");
}

std::optional<fs::path> ResolveTensorBoardDir(const TrainConfig& config, const common::JobPaths& paths) {
  if (!config.GetBool("TENSORBOARD.ENABLED"))
    return std::nullopt;
  if (const std::string& dir = config.GetString("TENSORBOARD.DIR"); !dir.empty())
    return fs::path(dir);
  const fs::path file = paths.input_config / "tensorboardoutputconfig.json";
  if (const auto doc = common::ReadJsonObjectFile(file)) {
    if (auto local = common::OptionalString(*doc, "LocalPath", file, "LocalPath"); local && !local->empty())
      return fs::path(*local);
  }
  return paths.output / "tensorboard";
}

TrainJob ResolveTrainJob(const TrainJobArgs& args, const common::EnvMap& env, const fs::path& executable) {
  TrainJob job;
  // Under the entrypoint the base dir reaches us only through the SM_* paths it exports
  // (SM_INPUT_DIR = <base>/input), so derive it from them before falling back to /opt/ml.
  std::optional<std::string> base_dir = args.base_dir;
  if (!base_dir && !common::Lookup(env, "SAGEMAKER_BASE_DIR")) {
    if (auto input = common::Lookup(env, "SM_INPUT_DIR"); input && !input->empty()) {
      base_dir = fs::path(*input).parent_path().string();
    }
  }
  job.paths = common::MakeJobPaths(common::ResolveBaseDir(base_dir, env));
  job.config = TrainConfig::Defaults();
  job.config_sources.push_back("defaults");
  std::optional<std::string> config_file = args.config_file;
  if (!config_file) {
    if (auto d = common::Lookup(env, "MRCNN_DEFAULT_CONFIG"); d && !d->empty()) config_file = *d;
  }
  if (config_file) {
    fs::path file = *config_file;
    if (file.is_relative()) file = ConfigDir(env, executable) / file;
    // A Detectron2 model-zoo name ("COCO-InstanceSegmentation/mask_rcnn_R_50_FPN_3x.yaml")
    // that is not a file of its own names the equivalent shipped config.
    // The error_code overloads: a value the system refuses to look up (a name over NAME_MAX)
    // reads as "does not exist" instead of escaping as a std::filesystem exception.
    std::error_code ec;
    if (!fs::exists(file, ec)) {
      if (auto shipped = ModelZooConfig(*config_file)) file = ConfigDir(env, executable) / *shipped;
    }
    if (!fs::is_regular_file(file, ec)) {
      throw ConfigError(kArgsSource, "config-file",
                        "names " + file.string() + ", which does not exist (relative names are looked up in " +
                            ConfigDir(env, executable).string() + ", set by MRCNN_CONFIG_DIR)");
    }
    job.config.MergeFile(file);
    job.config_sources.push_back(file.string());
  }
  if (args.local_config_file) {
    std::error_code ec;
    fs::path file = *args.local_config_file;
    if (file.is_relative()) {
      fs::path code_dir = job.paths.code;
      if (auto m = common::Lookup(env, "SM_MODULE_DIR"); m && !m->empty() && fs::is_directory(*m, ec)) code_dir = *m;
      file = code_dir / file;
    }
    if (!fs::is_regular_file(file, ec)) {
      throw ConfigError(kArgsSource, "local-config-file",
                        "names " + file.string() + ", which does not exist (relative names are looked up in the code dir)");
    }
    job.config.MergeFile(file);
    job.config_sources.push_back(file.string());
  }
  if (args.opts) {
    job.config.MergeOpts(TrainConfig::SplitOpts(*args.opts), "opts");
    job.config_sources.push_back("opts");
  }
  InputCropOf(job.config);  // a bad INPUT.CROP stops the job here, before any data is read

  const ChannelDelivery delivery = ReadChannelDelivery(job.paths);
  const auto& train_channels = job.config.GetStringList("DATASETS.TRAIN");
  if (train_channels.size() != 1) {
    throw ConfigError("config", "DATASETS.TRAIN", "must name exactly one channel, e.g. [\"train\"]");
  }
  if (!args.eval_only) {
    auto train = Channel(train_channels.front(), env, job.paths, delivery);
    if (!train) {
      throw ConfigError("environment", "SM_CHANNEL_" + train_channels.front(),
                        "the training channel \"" + train_channels.front() + "\" (DATASETS.TRAIN) is missing");
    }
    job.train_dir = *train;
    job.train_channel = train_channels.front();
  }
  for (const auto& name : job.config.GetStringList("DATASETS.TEST")) {
    if (auto dir = Channel(name, env, job.paths, delivery)) {
      job.test_dir = *dir;
      job.test_channel = name;
      break;
    }
  }
  job.checkpoint_dir =
      common::ParseCheckpointConfig(job.paths.input_config / "checkpointconfig.json", job.paths).local_path;
  const std::string mirror = common::Lookup(env, "MRCNN_ZOO_MIRROR").value_or("");
  WeightsChoice weights = ResolveWeights(job.config.GetString("MODEL.WEIGHTS"),
                                         Channel("weights", env, job.paths, delivery),
                                         download::WeightsCacheDir(env, job.checkpoint_dir), mirror);
  job.weights = weights.file;
  job.weights_url = weights.url;
  if (std::error_code ec; job.weights && job.weights_url.empty() && !fs::is_regular_file(*job.weights, ec)) {
    throw ConfigError("config", "MODEL.WEIGHTS", "names " + job.weights->string() + ", which does not exist");
  }
  job.model_dir = EnvPathOr(env, "SM_MODEL_DIR", job.paths.model);
  const std::string& output = job.config.GetString("OUTPUT_DIR");
  job.output_dir = !output.empty() ? fs::path(output) : EnvPathOr(env, "SM_OUTPUT_DATA_DIR", job.paths.output_data);
  job.tensorboard_dir = ResolveTensorBoardDir(job.config, job.paths);
  job.resume = args.resume;
  job.eval_only = args.eval_only;
  return job;
}

}  // namespace mrcnn::engine
