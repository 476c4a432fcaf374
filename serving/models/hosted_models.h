#pragma once
// The models of a multi-model endpoint (SAGEMAKER_MULTI_MODEL=true): SageMaker loads a model
// with POST /models {"model_name", "url"}, invokes it with POST /models/{name}/invoke and
// unloads it with DELETE /models/{name}. Each hosted model has an InferenceExecutor of its
// own, so requests to different models run in parallel and one model's queue never holds up
// another's.
//
// Memory: every model is charged its estimated footprint (ModelFootprint) against one
// budget. A load that does not fit evicts the least recently used models (their in-flight
// requests finish first) until it does; a model that would not fit even in an empty server
// is refused without evicting anything (kInsufficientMemory, HTTP 507).
//
// Lifetime: Acquire() hands out a lease that keeps the model's executor alive while a
// request uses it. Unload and eviction take the model out of the table at once (new
// requests get 404), then wait until its leases are gone before stopping its executor.
// Thread-safe; Load and Unload block (the HTTP layer calls them off its I/O threads).
// Torch-free.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "serving/models/inference_executor.h"

namespace mrcnn::serving {

// Bytes a model is charged: `workers` copies of its weights (every executor worker holds a
// predictor of its own) plus `workspace_bytes` per worker for activations. The weights are
// the regular files in `dir` (model.safetensors dominates). Throws std::filesystem_error
// when `dir` cannot be read.
uint64_t ModelFootprint(const std::filesystem::path& dir, int workers, uint64_t workspace_bytes);

struct HostedModelsOptions {
  uint64_t memory_budget_bytes = 0;  // 0: no limit
  // Makes a model's executor for `dir`; loading starts at once, on_loaded reports its end
  // (nullptr when ready), as InferenceExecutor's constructor does. Shared so that it can
  // carry what must outlive the executor (its CoreShare) as the owner.
  std::function<std::shared_ptr<InferenceExecutor>(const std::filesystem::path& dir,
                                                   std::function<void(std::exception_ptr)>)>
      make_executor;
  // The footprint charged for `dir`; throws when the dir cannot be read.
  std::function<uint64_t(const std::filesystem::path& dir)> footprint;
  // One line per load, eviction and unload (the server's log).
  std::function<void(const std::string&)> log = [](const std::string&) {};
};

class HostedModels {
 public:
  explicit HostedModels(HostedModelsOptions options);
  ~HostedModels();  // unloads everything, waiting for leases
  HostedModels(const HostedModels&) = delete;
  HostedModels& operator=(const HostedModels&) = delete;

  enum class LoadStatus { kLoaded, kAlreadyLoaded, kNotFound, kBadModel, kInsufficientMemory };
  struct LoadResult {
    LoadStatus status = LoadStatus::kLoaded;
    std::string detail;                // what went wrong, for the error body
    std::vector<std::string> evicted;  // models unloaded to make room, oldest use first
    std::chrono::milliseconds load_time{0};
  };
  // Loads `url` (a local directory; SageMaker has copied the model there) under `name` and
  // returns once it answers (loaded and warmed up) or failed. kAlreadyLoaded while the name
  // is loaded or loading; kNotFound when `url` is not a directory; kBadModel when loading
  // throws (the detail says why).
  LoadResult Load(const std::string& name, const std::filesystem::path& url);

  // Keeps a model's executor alive while a request uses it.
  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& other) noexcept;
    Lease& operator=(Lease&& other) noexcept;
    ~Lease();
    explicit operator bool() const { return executor_ != nullptr; }
    InferenceExecutor& executor() const { return *executor_; }

   private:
    friend class HostedModels;
    struct Entry;
    Lease(std::shared_ptr<Entry> entry, InferenceExecutor* executor);
    void Release();
    std::shared_ptr<Entry> entry_;
    InferenceExecutor* executor_ = nullptr;
  };
  // An empty lease when `name` is not loaded (or still loading). Marks the model used.
  Lease Acquire(const std::string& name);

  // False when `name` is not loaded. Returns after its in-flight requests have finished.
  bool Unload(const std::string& name);

  struct ModelInfo {
    std::string name;
    std::string url;
    uint64_t footprint_bytes = 0;
  };
  // Loaded models (not those still loading), sorted by name.
  std::vector<ModelInfo> List() const;
  std::optional<ModelInfo> Find(const std::string& name) const;
  uint64_t charged_bytes() const;
  uint64_t memory_budget_bytes() const { return options_.memory_budget_bytes; }

 private:
  struct Model;
  std::shared_ptr<Model> TakeOut(const std::string& name);  // under mutex_
  void Retire(std::shared_ptr<Model> model, const std::string& why);

  HostedModelsOptions options_;
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_ptr<Model>> models_;  // loaded and loading
  uint64_t charged_ = 0;    // loaded and loading (not retiring: TakeOut uncharges)
  uint64_t use_clock_ = 0;  // LRU order
};

}  // namespace mrcnn::serving
