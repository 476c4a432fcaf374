#pragma once
// What `trainer train` gets from its launcher, turned into a resolved config and paths.
//
// argv: the hyperparameters of detectron2-sagemaker as sorted "--key value" pairs (the
// public toolkit's encoding: strings raw, booleans true/false):
//   --config-file F        a config shipped with the image: absolute, or relative to the
//                          image's configs dir (MRCNN_CONFIG_DIR, else <exe>/../../configs,
//                          else /opt/mrcnn/configs); absent: $MRCNN_DEFAULT_CONFIG when
//                          set (an image's own default, e.g. Dockerfile.dronetraining)
//   --local-config-file F  a config in the user's code dir (SM_MODULE_DIR when it is a
//                          local directory, else <base>/code), merged after --config-file
//   --opts "K V K V ..."   overrides, merged last (also a JSON/YAML list of tokens)
//   --resume B             true: resume (error if no valid checkpoint); false: start
//                          fresh; absent: resume when a checkpoint exists (spot restarts)
//   --eval-only B          evaluate MODEL.WEIGHTS (or the newest checkpoint) and stop
//   --base-dir D           the /opt/ml root (default SAGEMAKER_BASE_DIR or /opt/ml)
// Environment: SM_CHANNEL_<NAME> (else <base>/input/data/<name>), SM_MODEL_DIR,
// SM_OUTPUT_DATA_DIR, input/config/checkpointconfig.json. Torch-free.
// A channel the trainer reads (train, the evaluated test channel, weights) must be a
// directory with all of its objects: Pipe mode (per inputdataconfig.json, or FIFOs
// <channel>_0, ... where the directory should be) and ShardedByS3Key with more than one
// host in resourceconfig.json are ConfigErrors naming inputdataconfig.json and the field.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "common/env_map.h"
#include "common/job_paths.h"
#include "trainer/engine/config/config.h"

namespace mrcnn::engine {

struct TrainJobArgs {
  std::optional<std::string> config_file;
  std::optional<std::string> local_config_file;
  std::optional<std::string> opts;
  std::optional<bool> resume;
  bool eval_only = false;
  std::optional<std::string> base_dir;
};

// Parses "--key value" and "--key=value"; hyphens and underscores in keys are equivalent.
// An unknown key is a ConfigError naming the closest known one; booleans accept
// true/false (any case) and 1/0.
TrainJobArgs ParseTrainJobArgs(const std::vector<std::string>& argv);

struct TrainJob {
  TrainConfig config;
  std::vector<std::string> config_sources;  // in merge order: "defaults", files, "opts"
  common::JobPaths paths;
  std::filesystem::path train_dir;                // the DATASETS.TRAIN channel
  std::string train_channel;                      // its name ("" with eval_only)
  std::optional<std::filesystem::path> test_dir;  // the first DATASETS.TEST channel present
  std::string test_channel;                       // its name ("" when none)
  std::optional<std::filesystem::path> weights;   // MODEL.WEIGHTS resolved (see ResolveWeights)
  std::string weights_url;  // not empty: `weights` is this URL's cache file, which
                            // FetchJobWeights (weights_fetch.h) fills before training
  std::filesystem::path model_dir;
  std::filesystem::path output_dir;      // OUTPUT_DIR, else SM_OUTPUT_DATA_DIR, else <base>/output/data
  std::filesystem::path checkpoint_dir;  // checkpointconfig.json LocalPath, else <base>/checkpoints
  std::optional<std::filesystem::path> tensorboard_dir;  // see ResolveTensorBoardDir
  std::optional<bool> resume;
  bool eval_only = false;
};

// Where TensorBoard event files go: TENSORBOARD.DIR when set; else SageMaker's
// TensorBoardOutputConfig LocalPath (input/config/tensorboardoutputconfig.json, which
// SageMaker writes when the job has one and uploads from); else <base>/output/tensorboard.
// nullopt when TENSORBOARD.ENABLED is false.
std::optional<std::filesystem::path> ResolveTensorBoardDir(const TrainConfig& config, const common::JobPaths& paths);

// The configs directory of the image (see above). `executable` is this program's path.
std::filesystem::path ConfigDir(const common::EnvMap& env, const std::filesystem::path& executable);

// Resolves everything; reads config files, checks that the files named exist. Directories
// are not created. Throws ConfigError naming the source and key.
TrainJob ResolveTrainJob(const TrainJobArgs& args, const common::EnvMap& env,
                         const std::filesystem::path& executable);

// MODEL.WEIGHTS as a file, or as a URL to fetch into the weights cache.
struct WeightsChoice {
  std::optional<std::filesystem::path> file;  // none: train from scratch
  std::string url;  // not empty: `file` is its cache file and may not exist yet
};

// MODEL.WEIGHTS: absolute -> itself; relative -> inside the weights channel; empty with a
// weights channel holding exactly one checkpoint file (.safetensors, .pth, .pkl) -> that
// file; otherwise none. A URL (detectron2://, catalog://, https://, http://, s3://; see
// download/zoo_url.h, with `mirror` = MRCNN_ZOO_MIRROR applied), as the zoo configs name
// Detectron2's ImageNet backbones, in this order: the weights channel's checkpoint file of
// the URL's file name, else its one checkpoint file; else the URL's file in `cache_dir`
// (download/weights_cache.h), fetched when absent. A gs:// URL or an unknown catalog:// name
// is a ConfigError naming MODEL.WEIGHTS.
WeightsChoice ResolveWeights(const std::string& weights_key,
                             const std::optional<std::filesystem::path>& weights_channel,
                             const std::filesystem::path& cache_dir, const std::string& mirror);

}  // namespace mrcnn::engine
