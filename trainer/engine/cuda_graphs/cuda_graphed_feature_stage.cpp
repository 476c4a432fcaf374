#include "trainer/engine/cuda_graphs/cuda_graphed_feature_stage.h"

#include <ATen/autocast_mode.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>

#include "trainer/model/meta_arch/meta_arch.h"

namespace mrcnn::engine {
namespace {

// One shape's captured graphs and the tensors they read and write in place.
struct FeatureStageGraph {
  at::Tensor input;                 // full_batch × 3 × H × W: the forward graph reads it
  std::vector<at::Tensor> outputs;  // features, then RPN logits, then deltas
  size_t feature_count = 0, logit_count = 0;
  std::vector<bool> differentiable;      // per output: it requires grad
  std::vector<at::Tensor> grad_outputs;  // the backward graph reads them (differentiable only)
  std::vector<at::Tensor> param_grads;   // the backward graph writes them (undefined: unused)
  at::cuda::CUDAGraph forward, backward;
};

std::vector<at::Tensor> Flatten(const model::FeatureStageOutput& o) {
  std::vector<at::Tensor> out(o.features);
  out.insert(out.end(), o.head_logits.begin(), o.head_logits.end());
  out.insert(out.end(), o.head_deltas.begin(), o.head_deltas.end());
  return out;
}

model::FeatureStageOutput Unflatten(const std::vector<at::Tensor>& flat, size_t features,
                                    size_t logits) {
  model::FeatureStageOutput out;
  const auto begin = flat.begin();
  out.features.assign(begin, begin + static_cast<std::ptrdiff_t>(features));
  out.head_logits.assign(begin + static_cast<std::ptrdiff_t>(features),
                         begin + static_cast<std::ptrdiff_t>(features + logits));
  out.head_deltas.assign(begin + static_cast<std::ptrdiff_t>(features + logits), flat.end());
  return out;
}

// Autocast as the trainer's forward has it, with the cast cache off: a cached cast made
// during capture would be a tensor of the graph's pool reused outside it. The state before
// (the step has usually enabled autocast already) comes back afterwards.
class CaptureAutocast {
 public:
  explicit CaptureAutocast(std::optional<at::ScalarType> dtype)
      : was_enabled_(at::autocast::is_autocast_enabled(at::kCUDA)),
        was_dtype_(at::autocast::get_autocast_dtype(at::kCUDA)),
        was_cache_(at::autocast::is_autocast_cache_enabled()) {
    at::autocast::set_autocast_cache_enabled(false);
    if (dtype)
      at::autocast::set_autocast_dtype(at::kCUDA, *dtype);
    at::autocast::set_autocast_enabled(at::kCUDA, dtype.has_value());
  }
  ~CaptureAutocast() {
    at::autocast::set_autocast_enabled(at::kCUDA, was_enabled_);
    at::autocast::set_autocast_dtype(at::kCUDA, was_dtype_);
    at::autocast::set_autocast_cache_enabled(was_cache_);
  }
  CaptureAutocast(const CaptureAutocast&) = delete;
  CaptureAutocast& operator=(const CaptureAutocast&) = delete;

 private:
  bool was_enabled_;
  at::ScalarType was_dtype_;
  bool was_cache_;
};

// d(outputs)/d(params) for the given output gradients, as the backward graph computes it.
std::vector<at::Tensor> StageGradients(const std::vector<at::Tensor>& outputs,
                                       const std::vector<bool>& differentiable,
                                       const std::vector<at::Tensor>& grad_outputs,
                                       const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> outs;
  for (size_t i = 0; i < outputs.size(); ++i)
    if (differentiable[i])
      outs.push_back(outputs[i]);
  return torch::autograd::grad(outs, params, grad_outputs, /*retain_graph=*/false,
                               /*create_graph=*/false, /*allow_unused=*/true);
}

std::unique_ptr<FeatureStageGraph> Capture(model::MetaArchitecture& net, const at::Tensor& sample,
                                           const std::vector<at::Tensor>& params,
                                           std::optional<at::ScalarType> amp_dtype) {
  auto g = std::make_unique<FeatureStageGraph>();
  const c10::DeviceIndex device = sample.device().index();
  const c10::cuda::CUDAGuard device_guard(sample.device());
  g->input = sample.clone();
  // Benchmarks synchronize in the phase hook; nothing may wait on a capturing stream. The
  // hook comes back on every exit, a failed capture included.
  struct PhaseHookOff {
    model::MetaArchitecture& net;
    const std::function<void(const char*)> saved;
    ~PhaseHookOff() { net.set_phase_hook(saved); }
  } phase_hook_off{net, net.phase_hook()};
  net.set_phase_hook({});
  const c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool(false, device);
  at::cuda::CUDAEvent ready;
  ready.record(c10::cuda::getCurrentCUDAStream(device));
  ready.block(side);
  {
    const c10::cuda::CUDAStreamGuard stream_guard(side);
    const CaptureAutocast autocast(amp_dtype);
    for (int warmup = 0; warmup < 3; ++warmup) {
      const std::vector<at::Tensor> out = Flatten(net.FeatureStage(g->input));
      std::vector<bool> differentiable;
      std::vector<at::Tensor> ones;
      for (const at::Tensor& o : out) {
        differentiable.push_back(o.requires_grad());
        if (o.requires_grad())
          ones.push_back(torch::ones_like(o));
      }
      StageGradients(out, differentiable, ones, params);
    }
    side.synchronize();

    const model::FeatureStageOutput captured = [&] {
      g->forward.capture_begin(at::cuda::graph_pool_handle(), cudaStreamCaptureModeThreadLocal);
      model::FeatureStageOutput out = net.FeatureStage(g->input);
      g->forward.capture_end();
      return out;
    }();
    g->feature_count = captured.features.size();
    g->logit_count = captured.head_logits.size();
    g->outputs = Flatten(captured);
    for (const at::Tensor& o : g->outputs) {
      g->differentiable.push_back(o.requires_grad());
      if (o.requires_grad())
        g->grad_outputs.push_back(torch::empty_like(o));
    }
    g->backward.capture_begin(g->forward.pool(), cudaStreamCaptureModeThreadLocal);
    g->param_grads = StageGradients(g->outputs, g->differentiable, g->grad_outputs, params);
    g->backward.capture_end();
  }
  side.synchronize();
  return g;
}

// The graphs as one autograd node: forward replays the forward graph, backward copies the
// incoming gradients in, replays the backward graph and hands the parameter gradients to
// autograd (copies: a micro-batch's replay must not overwrite an earlier one's gradients
// while they are being accumulated).
class ReplayFeatureStage : public torch::autograd::Function<ReplayFeatureStage> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx,
                                                FeatureStageGraph* graph, const at::Tensor& input,
                                                at::TensorList params) {
    (void)params;  // inputs only so that autograd routes their gradients
    graph->input.copy_(input);
    graph->forward.replay();
    ctx->saved_data["graph"] = static_cast<int64_t>(reinterpret_cast<intptr_t>(graph));
    torch::autograd::variable_list out;
    for (const at::Tensor& o : graph->outputs)
      out.push_back(o.detach());
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto* graph = reinterpret_cast<FeatureStageGraph*>(
        static_cast<intptr_t>(ctx->saved_data["graph"].toInt()));
    size_t k = 0;
    for (size_t i = 0; i < graph->outputs.size(); ++i) {
      if (!graph->differentiable[i])
        continue;
      if (grads[i].defined())
        graph->grad_outputs[k].copy_(grads[i]);
      else
        graph->grad_outputs[k].zero_();
      ++k;
    }
    graph->backward.replay();
    torch::autograd::variable_list result{at::Tensor(), at::Tensor()};  // graph, input
    for (const at::Tensor& g : graph->param_grads)
      result.push_back(g.defined() ? g.clone() : at::Tensor());
    return result;
  }
};

class CudaGraphedFeatureStage final : public PaddedFeatureStage {
 public:
  CudaGraphedFeatureStage(model::MetaArchitecture& net, std::vector<std::array<int64_t, 2>> shapes,
                          int64_t full_batch, std::optional<at::ScalarType> amp_dtype)
      : PaddedFeatureStage(net, std::move(shapes), full_batch),
        amp_dtype_(amp_dtype),
        params_(net.FeatureStageParameters()) {
    graphs_.resize(shapes_.size());
  }

 protected:
  model::FeatureStageOutput RunPadded(size_t shape_index, const at::Tensor& padded) override {
    if (!padded.is_cuda())
      throw std::runtime_error("SOLVER.CUDA_GRAPHS: the batch is on " + padded.device().str() +
                               ", graphs need CUDA tensors");
    std::unique_ptr<FeatureStageGraph>& graph = graphs_[shape_index];
    if (!graph)
      graph = Capture(net_, padded, params_, amp_dtype_);
    const torch::autograd::variable_list out =
        ReplayFeatureStage::apply(graph.get(), padded, at::TensorList(params_));
    return Unflatten(out, graph->feature_count, graph->logit_count);
  }

 private:
  std::optional<at::ScalarType> amp_dtype_;
  std::vector<at::Tensor> params_;
  std::vector<std::unique_ptr<FeatureStageGraph>> graphs_;  // by shape; null until captured
};

}  // namespace

bool CudaGraphsCompiled() {
  return true;
}

std::unique_ptr<PaddedFeatureStage> MakeCudaGraphedFeatureStage(
    model::MetaArchitecture& net, std::vector<std::array<int64_t, 2>> shapes, int64_t full_batch,
    std::optional<at::ScalarType> amp_dtype) {
  return std::make_unique<CudaGraphedFeatureStage>(net, std::move(shapes), full_batch, amp_dtype);
}

}  // namespace mrcnn::engine
