#include "serving/models/hosted_models.h"

#include <fmt/format.h>

#include <algorithm>
#include <future>
#include <system_error>

namespace mrcnn::serving {

uint64_t ModelFootprint(const std::filesystem::path& dir, int workers, uint64_t workspace_bytes) {
  uint64_t weights = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.is_regular_file())
      weights += entry.file_size();
  }
  return static_cast<uint64_t>(std::max(workers, 1)) * (weights + workspace_bytes);
}

struct HostedModels::Lease::Entry {
  std::mutex mutex;
  std::condition_variable idle;
  int in_flight = 0;
};

struct HostedModels::Model {
  std::string name;
  std::filesystem::path url;
  uint64_t footprint = 0;
  uint64_t last_use = 0;
  bool ready = false;  // loaded and warmed up: Acquire hands it out
  std::shared_ptr<Lease::Entry> leases = std::make_shared<Lease::Entry>();
  std::shared_ptr<InferenceExecutor> executor;
};

HostedModels::Lease::Lease(std::shared_ptr<Entry> entry, InferenceExecutor* executor)
    : entry_(std::move(entry)), executor_(executor) {}

HostedModels::Lease::Lease(Lease&& other) noexcept
    : entry_(std::move(other.entry_)), executor_(other.executor_) {
  other.executor_ = nullptr;
}

HostedModels::Lease& HostedModels::Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    Release();
    entry_ = std::move(other.entry_);
    executor_ = other.executor_;
    other.executor_ = nullptr;
  }
  return *this;
}

HostedModels::Lease::~Lease() {
  Release();
}

void HostedModels::Lease::Release() {
  if (!entry_)
    return;
  {
    std::lock_guard lock(entry_->mutex);
    if (--entry_->in_flight == 0)
      entry_->idle.notify_all();
  }
  entry_.reset();
  executor_ = nullptr;
}

HostedModels::HostedModels(HostedModelsOptions options) : options_(std::move(options)) {}

HostedModels::~HostedModels() {
  std::vector<std::shared_ptr<Model>> all;
  {
    std::lock_guard lock(mutex_);
    for (auto& [name, model] : models_)
      all.push_back(model);
    models_.clear();
  }
  for (auto& model : all) {
    if (model->executor)
      Retire(model, "the server is stopping");
  }
}

std::shared_ptr<HostedModels::Model> HostedModels::TakeOut(const std::string& name) {
  auto it = models_.find(name);
  if (it == models_.end())
    return nullptr;
  auto model = it->second;
  models_.erase(it);
  charged_ -= model->footprint;
  return model;
}

void HostedModels::Retire(std::shared_ptr<Model> model, const std::string& why) {
  {
    std::unique_lock lock(model->leases->mutex);
    model->leases->idle.wait(lock, [&] { return model->leases->in_flight == 0; });
  }
  if (model->executor)
    model->executor->Stop();
  model->executor.reset();
  options_.log(fmt::format("unloaded model {} ({})", model->name, why));
}

HostedModels::LoadResult HostedModels::Load(const std::string& name,
                                            const std::filesystem::path& url) {
  LoadResult result;
  const auto started = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(mutex_);
    if (models_.count(name) != 0) {
      result.status = LoadStatus::kAlreadyLoaded;
      result.detail = fmt::format(
          "model {} is already loaded (or loading); DELETE /models/{} first "
          "to load it again",
          name, name);
      return result;
    }
  }
  std::error_code ec;
  if (!std::filesystem::is_directory(url, ec)) {
    result.status = LoadStatus::kNotFound;
    result.detail = fmt::format("url {} is not a directory on this host", url.string());
    return result;
  }
  uint64_t footprint = 0;
  try {
    footprint = options_.footprint(url);
  } catch (const std::exception& e) {
    result.status = LoadStatus::kBadModel;
    result.detail = fmt::format("cannot read the model dir {}: {}", url.string(), e.what());
    return result;
  }
  const uint64_t budget = options_.memory_budget_bytes;
  auto model = std::make_shared<Model>();
  model->name = name;
  model->url = url;
  model->footprint = footprint;
  std::vector<std::shared_ptr<Model>> evicted;
  {
    std::lock_guard lock(mutex_);
    if (models_.count(name) != 0) {  // a concurrent load of the same name won
      result.status = LoadStatus::kAlreadyLoaded;
      result.detail = fmt::format("model {} is already loaded (or loading)", name);
      return result;
    }
    if (budget != 0 && footprint > budget) {
      result.status = LoadStatus::kInsufficientMemory;
      result.detail = fmt::format(
          "model {} needs about {} MiB, more than the whole memory budget of {} MiB "
          "(MRCNN_MME_MEMORY_BUDGET_MB; MRCNN_MME_WORKSPACE_MB per worker is part of the "
          "estimate)",
          name, footprint >> 20, budget >> 20);
      return result;
    }
    while (budget != 0 && charged_ + footprint > budget) {
      std::shared_ptr<Model> oldest;
      for (auto& [other_name, other] : models_) {
        if (other->ready && (!oldest || other->last_use < oldest->last_use))
          oldest = other;
      }
      if (!oldest) {
        // Only loading models remain; they will be needed as soon as they are ready.
        for (auto& gone : evicted) {  // nothing was unloaded yet: put them back
          models_[gone->name] = gone;
          charged_ += gone->footprint;
        }
        result.status = LoadStatus::kInsufficientMemory;
        result.detail = fmt::format(
            "model {} needs about {} MiB; {} MiB of the {} MiB budget is taken by models that "
            "are loading now; try again when they are loaded",
            name, footprint >> 20, charged_ >> 20, budget >> 20);
        return result;
      }
      evicted.push_back(TakeOut(oldest->name));
    }
    models_[name] = model;
    charged_ += footprint;
  }
  for (auto& gone : evicted) {
    result.evicted.push_back(gone->name);
    Retire(gone, fmt::format("least recently used; evicted to make room for {}", name));
  }

  std::promise<std::exception_ptr> loaded;
  auto loaded_future = loaded.get_future();
  auto on_loaded = [promise = std::make_shared<std::promise<std::exception_ptr>>(std::move(
                        loaded))](std::exception_ptr error) mutable { promise->set_value(error); };
  std::exception_ptr error;
  std::shared_ptr<InferenceExecutor> executor;
  try {
    executor = options_.make_executor(url, on_loaded);
    error = loaded_future.get();
  } catch (...) {
    error = std::current_exception();
  }
  result.load_time = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - started);
  if (error) {
    if (executor)
      executor->Stop();
    {
      std::lock_guard lock(mutex_);
      TakeOut(name);
    }
    result.status = LoadStatus::kBadModel;
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      result.detail =
          fmt::format("model {} from {} failed to load: {}", name, url.string(), e.what());
    } catch (...) {
      result.detail = fmt::format("model {} from {} failed to load", name, url.string());
    }
    options_.log(result.detail);
    return result;
  }
  {
    std::lock_guard lock(mutex_);
    model->executor = std::move(executor);
    model->ready = true;
    model->last_use = ++use_clock_;
  }
  options_.log(fmt::format("loaded model {} from {} in {} ms (about {} MiB of {} MiB charged)",
                           name, url.string(), result.load_time.count(), footprint >> 20,
                           charged_bytes() >> 20));
  return result;
}

HostedModels::Lease HostedModels::Acquire(const std::string& name) {
  std::lock_guard lock(mutex_);
  auto it = models_.find(name);
  if (it == models_.end() || !it->second->ready)
    return {};
  Model& model = *it->second;
  model.last_use = ++use_clock_;
  {
    std::lock_guard entry_lock(model.leases->mutex);
    ++model.leases->in_flight;
  }
  return Lease(model.leases, model.executor.get());
}

bool HostedModels::Unload(const std::string& name) {
  std::shared_ptr<Model> model;
  {
    std::lock_guard lock(mutex_);
    auto it = models_.find(name);
    if (it == models_.end() || !it->second->ready)
      return false;
    model = TakeOut(name);
  }
  Retire(model, "DELETE /models/" + name);
  return true;
}

std::vector<HostedModels::ModelInfo> HostedModels::List() const {
  std::lock_guard lock(mutex_);
  std::vector<ModelInfo> list;
  for (const auto& [name, model] : models_) {  // std::map: sorted by name
    if (model->ready)
      list.push_back({name, model->url.string(), model->footprint});
  }
  return list;
}

std::optional<HostedModels::ModelInfo> HostedModels::Find(const std::string& name) const {
  std::lock_guard lock(mutex_);
  auto it = models_.find(name);
  if (it == models_.end() || !it->second->ready)
    return std::nullopt;
  return ModelInfo{name, it->second->url.string(), it->second->footprint};
}

uint64_t HostedModels::charged_bytes() const {
  std::lock_guard lock(mutex_);
  return charged_;
}

}  // namespace mrcnn::serving
