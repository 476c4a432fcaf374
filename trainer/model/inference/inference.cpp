#include "trainer/model/inference/inference.h"

#include <ATen/autocast_mode.h>
#include <torch/torch.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "kernels/ops.h"
#include "trainer/model/backbone/fast_conv.h"
#include "trainer/model/config.h"
#include "trainer/model/inference/detections_transfer.h"
#include "trainer/model/inference/inference_state.h"
#include "trainer/model/meta_arch/meta_arch.h"
#include "trainer/model/safetensors.h"
#include "trainer/model/tiles/tile_grid.h"
#include "trainer/model/tiles/tiled_prediction.h"
#include "trainer/model/weights/weights_import.h"

namespace mrcnn::model {

std::string ResolvePrecision(const std::string& requested, bool cuda) {
  if (requested == "auto") {
    if (cuda)
      return "fp32";
    return CpuHasFastBf16() ? "bf16" : "fp32-fast";
  }
  if (requested == "fp16" && !cuda)
    throw std::runtime_error(
        "inference option precision: fp16 needs a CUDA device (on CPU use bf16 or auto)");
  if (requested == "fp32-fast" && cuda)
    throw std::runtime_error(
        "inference option precision: fp32-fast is the CPU's Winograd mode (on CUDA use fp32, "
        "bf16 or fp16)");
  if (requested != "fp32" && requested != "fp32-fast" && requested != "fp16" && requested != "bf16")
    throw std::runtime_error("inference option precision: '" + requested +
                             "' is not auto, fp32, fp32-fast, fp16 or bf16");
  return requested;
}

std::vector<ImageResult> InferenceModel::State::Forward(const ModelInputs& inputs) {
  const CpuPrecisionScope cpu_precision(cpu_mode);
  if (autocast_dtype == at::kFloat) {
    return TakeInstances(model->forward(inputs.images, std::nullopt, inputs.output_sizes));
  }
  // Restores the thread's autocast state on every exit path.
  struct AutocastScope {
    explicit AutocastScope(at::ScalarType dtype) {
      at::autocast::set_autocast_enabled(at::kCUDA, true);
      at::autocast::set_autocast_dtype(at::kCUDA, dtype);
    }
    ~AutocastScope() {
      at::autocast::set_autocast_enabled(at::kCUDA, false);
      at::autocast::clear_cache();
    }
  } scope(autocast_dtype);
  return TakeInstances(model->forward(inputs.images, std::nullopt, inputs.output_sizes));
}

Detection InferenceModel::State::Describe(int64_t label, const std::array<float, 4>& box,
                                          float score) const {
  Detection d;
  d.box = box;
  d.label = label;
  d.category_id = category_ids.at(static_cast<size_t>(label - 1));
  d.label_name = names.at(static_cast<size_t>(label - 1));
  d.score = score;
  return d;
}

namespace {

void ReadClasses(const std::filesystem::path& path, std::vector<std::string>& names,
                 std::vector<int64_t>& ids) {
  std::ifstream in(path);
  if (!in)
    throw std::runtime_error(path.string() +
                             ": cannot open class list (model dir needs classes.json)");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(path.string() + ": not valid JSON (" + e.what() + ")");
  }
  if (!j.is_array())
    throw std::runtime_error(path.string() +
                             ": must be a JSON array of {\"id\": int, \"name\": str}");
  for (size_t i = 0; i < j.size(); ++i) {
    const auto& e = j[i];
    if (!e.is_object() || !e.contains("id") || !e["id"].is_number_integer() ||
        !e.contains("name") || !e["name"].is_string()) {
      throw std::runtime_error(path.string() + ": entry " + std::to_string(i) +
                               " must be {\"id\": <integer category id>, \"name\": <string>}");
    }
    ids.push_back(e["id"].get<int64_t>());
    names.push_back(e["name"].get<std::string>());
  }
}

// A detectron2-sagemaker model dir holds Detectron2's checkpoint beside its config.yaml
// dump: model_final.pth, else model_final.pkl, else the dir's one .pth or .pkl.
std::optional<std::filesystem::path> Detectron2CheckpointIn(
    const std::filesystem::path& model_dir) {
  for (const char* name : {"model_final.pth", "model_final.pkl"}) {
    if (std::filesystem::is_regular_file(model_dir / name))
      return model_dir / name;
  }
  std::vector<std::filesystem::path> found;
  for (const auto& entry : std::filesystem::directory_iterator(model_dir)) {
    const std::string ext = entry.path().extension().string();
    if (entry.is_regular_file() && (ext == ".pth" || ext == ".pkl"))
      found.push_back(entry.path());
  }
  if (found.size() == 1)
    return found.front();
  return std::nullopt;
}

}  // namespace

InferenceModel::InferenceModel(std::unique_ptr<State> state) : state_(std::move(state)) {}
InferenceModel::~InferenceModel() = default;

std::unique_ptr<InferenceModel> InferenceModel::Load(const std::filesystem::path& model_dir,
                                                     const InferenceOptions& options) {
  if (!std::filesystem::is_directory(model_dir)) {
    throw std::runtime_error(model_dir.string() + ": model directory does not exist");
  }
  auto state = std::make_unique<State>();
  const ModelConfig config = ModelConfig::FromYamlFile(model_dir / "config.yaml");
  const bool ours = std::filesystem::exists(model_dir / "model.safetensors");
  const std::optional<std::filesystem::path> detectron2 =
      ours ? std::nullopt : Detectron2CheckpointIn(model_dir);
  if (!ours && !detectron2) {
    throw std::runtime_error(
        model_dir.string() +
        ": holds neither model.safetensors (with config.yaml and classes.json) nor a "
        "Detectron2 checkpoint (model_final.pth or model_final.pkl beside its config.yaml)");
  }
  if (detectron2 && !std::filesystem::exists(model_dir / "classes.json")) {
    // Detectron2's config names no classes: its class index i (0-based, as Detectron2's
    // pred_classes) is the category id, so answers keep the ids the model was trained with.
    for (int i = 0; i < config.num_classes; ++i) {
      state->category_ids.push_back(i);
      state->names.push_back("class_" + std::to_string(i));
    }
  } else {
    ReadClasses(model_dir / "classes.json", state->names, state->category_ids);
  }
  if (static_cast<int>(state->names.size()) != config.num_classes) {
    throw std::runtime_error((model_dir / "classes.json").string() + ": lists " +
                             std::to_string(state->names.size()) +
                             " classes but config.yaml MODEL.ROI_HEADS.NUM_CLASSES is " +
                             std::to_string(config.num_classes));
  }
  if (options.num_threads > 0)
    torch::set_num_threads(options.num_threads);
  try {
    state->device = torch::Device(options.device);
  } catch (const std::exception&) {
    throw std::runtime_error("inference option device: '" + options.device +
                             "' is not cpu, cuda or cuda:N");
  }
  if (state->device.is_cuda() && !torch::cuda::is_available()) {
    throw std::runtime_error("inference option device: '" + options.device +
                             "' requested but no CUDA device is available");
  }
  state->precision = ResolvePrecision(options.precision, state->device.is_cuda());
  if (state->device.is_cuda() && state->precision != "fp32")
    state->autocast_dtype = state->precision == "fp16" ? at::kHalf : at::kBFloat16;
  state->cpu_mode = CpuDenseModeOf(state->precision);
  state->model = BuildModel(config);
  if (detectron2) {
    // Every tensor of the model must come from the file (serving has no initialisation to
    // fall back on): LoadStateDict names the first one missing.
    std::ostringstream lines;
    LoadStateDict(*state->model,
                  weights::ReadDetectron2StateDict(*detectron2, *state->model, lines),
                  detectron2->string());
  } else {
    LoadStateDict(*state->model, ReadSafetensors(model_dir / "model.safetensors"),
                  (model_dir / "model.safetensors").string());
  }
  state->model->eval();
  state->model->to(state->device);
  return std::unique_ptr<InferenceModel>(new InferenceModel(std::move(state)));
}

const std::vector<std::string>& InferenceModel::ClassNames() const {
  return state_->names;
}
const std::string& InferenceModel::Precision() const {
  return state_->precision;
}
bool InferenceModel::HasMasks() const {
  return state_->model->config().mask_on;
}
int64_t InferenceModel::NumKeypoints() const {
  return state_->model->config().keypoint_on ? state_->model->config().num_keypoints : 0;
}
void InferenceModel::SetPhaseHook(std::function<void(const char*)> hook) {
  state_->model->set_phase_hook(std::move(hook));
}
const std::vector<int64_t>& InferenceModel::CategoryIds() const {
  return state_->category_ids;
}

std::vector<ImageDetections> InferenceModel::Predict(const std::vector<ImageView>& images,
                                                     const PredictOptions& options) {
  return Start(images, options)->Finish();
}

std::unique_ptr<PendingDetections> InferenceModel::Start(const std::vector<ImageView>& images,
                                                         const PredictOptions& options) {
  std::vector<ImageDetections> results(images.size());
  CheckTileOptions(options.tiles.size, options.tiles.overlap);
  if (options.tiles.batch < 1) {
    throw std::invalid_argument("tile batch " + std::to_string(options.tiles.batch) +
                                " must be at least 1 (tiles per forward pass)");
  }
  c10::InferenceMode guard;
  std::vector<size_t> whole;  // images that run untiled, together in one forward pass
  for (size_t i = 0; i < images.size(); ++i) {
    const ImageView& v = images[i];
    if (v.rgb == nullptr || v.height <= 0 || v.width <= 0) {
      throw std::invalid_argument("Predict: image " + std::to_string(i) + " is empty");
    }
    if (TilingApplies(v.height, v.width, options.tiles.size)) {
      const at::Tensor hwc =
          torch::from_blob(const_cast<uint8_t*>(v.rgb), {v.height, v.width, 3}, torch::kByte);
      State& state = *state_;
      const BatchForward forward = [&state](const ModelInputs& tiles) {
        return state.Forward(tiles);
      };
      results[i].height = v.height;
      results[i].width = v.width;
      for (TiledDetection& t : PredictTiled(*state.model, forward, state.device, hwc, options)) {
        Detection d = state.Describe(t.label, t.box, t.score);
        d.mask = std::move(t.mask.bits);
        d.mask_region = t.mask.region;
        // COCO's pixel indices, as the untiled path gives them (detections_transfer.cpp).
        for (const auto& p : t.keypoints)
          d.keypoints.push_back({p[0] - 0.5f, p[1] - 0.5f, p[2]});
        results[i].detections.push_back(std::move(d));
      }
    } else {
      whole.push_back(i);
    }
  }
  if (whole.empty())
    return StartDetectionsTransfer(*state_, std::move(results), {}, {}, false, options.mask_rle);

  ModelInputs inputs;
  for (size_t i : whole) {
    const ImageView& v = images[i];
    at::Tensor hwc =
        torch::from_blob(const_cast<uint8_t*>(v.rgb), {v.height, v.width, 3}, torch::kByte);
    AddModelInput(state_->model->config(), hwc, state_->device, inputs);
    results[i].height = v.height;
    results[i].width = v.width;
  }
  DetectionSettings& s = state_->model->detection_settings();
  s.score_thresh = options.score_threshold;
  s.detections_per_image = options.max_detections;
  s.masks = options.masks && state_->model->config().mask_on;
  s.mask_threshold = options.mask_threshold;
  s.paste_masks = true;
  const std::vector<ImageResult> out = state_->Forward(inputs);
  return StartDetectionsTransfer(*state_, std::move(results), std::move(whole), out, s.masks,
                                 options.mask_rle);
}

}  // namespace mrcnn::model
