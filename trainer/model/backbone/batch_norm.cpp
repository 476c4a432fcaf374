// BatchNorm2d and SyncBatchNorm2d (Detectron2's "BN" and "SyncBN", declared in parts.h).
#include <torch/torch.h>

#include "trainer/model/parts.h"

namespace mrcnn::model {
namespace {

// Sums a small double tensor over the processes: forward sums the values, backward the
// gradients (the sum is linear, so each process's input gets the sum of every process's
// output gradient).
class CrossProcessSumFunction : public torch::autograd::Function<CrossProcessSumFunction> {
 public:
  static at::Tensor SumOver(const CrossProcessSum& sum, const at::Tensor& t) {
    const at::Tensor host = t.detach().to(at::kCPU, at::kDouble).contiguous();
    std::vector<double> values(host.data_ptr<double>(), host.data_ptr<double>() + host.numel());
    sum(values);
    return at::tensor(values, at::TensorOptions().dtype(at::kDouble)).to(t.device());
  }
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& t,
                            const CrossProcessSum* sum) {
    ctx->saved_data["sum"] = reinterpret_cast<int64_t>(sum);
    return SumOver(*sum, t);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto* sum = reinterpret_cast<const CrossProcessSum*>(ctx->saved_data["sum"].toInt());
    return {SumOver(*sum, grads[0]), at::Tensor()};
  }
};

}  // namespace

BatchNorm2d::BatchNorm2d(int64_t channels) {
  weight_ = register_parameter("weight", torch::ones({channels}));
  bias_ = register_parameter("bias", torch::zeros({channels}));
  running_mean_ = register_buffer("running_mean", torch::zeros({channels}));
  running_var_ = register_buffer("running_var", torch::ones({channels}));
}

at::Tensor BatchNorm2d::forward(const at::Tensor& x) {
  if (is_training() && x.numel() == 0)
    return x;  // nothing to take statistics of (no RoIs in a head)
  return at::batch_norm(x, weight_, bias_, running_mean_, running_var_, is_training(), kMomentum,
                        kEps, /*cudnn_enabled=*/true);
}

at::Tensor SyncBatchNorm2d::forward(const at::Tensor& x) {
  if (!is_training() || !group_)
    return BatchNorm2d::forward(x);
  // Sums in float64 over this process's N x H x W, then over the processes: the global mean
  // and biased variance, as one batch of all of them.
  const int64_t channels = x.size(1);
  const at::Tensor local_count =
      at::full({1}, static_cast<double>(channels > 0 ? x.numel() / channels : 0),
               x.options().dtype(at::kDouble));
  const at::Tensor local = at::cat({x.sum({0, 2, 3}, false, at::kDouble),
                                    (x * x).sum({0, 2, 3}, false, at::kDouble), local_count});
  const at::Tensor global = CrossProcessSumFunction::apply(local, &group_);
  const double count = global[2 * channels].item<double>();
  if (count == 0)
    return x;
  const at::Tensor mean = global.slice(0, 0, channels) / count;
  const at::Tensor var = global.slice(0, channels, 2 * channels) / count - mean * mean;
  const at::Tensor scale = (weight_.to(at::kDouble) * (var + kEps).rsqrt());
  const at::Tensor shift = bias_.to(at::kDouble) - mean * scale;
  {
    torch::NoGradGuard no_grad;
    running_mean_.mul_(1 - kMomentum).add_(mean.to(running_mean_.dtype()), kMomentum);
    const double unbiased = count > 1 ? count / (count - 1) : 1.0;
    running_var_.mul_(1 - kMomentum).add_((var * unbiased).to(running_var_.dtype()), kMomentum);
  }
  return x * scale.to(x.scalar_type()).view({1, -1, 1, 1}) +
         shift.to(x.scalar_type()).view({1, -1, 1, 1});
}

int64_t SetSyncBatchNormGroup(torch::nn::Module& model, const CrossProcessSum& sum) {
  int64_t count = 0;
  for (const auto& module : model.modules(/*include_self=*/true)) {
    if (auto* sync = dynamic_cast<SyncBatchNorm2d*>(module.get())) {
      sync->SetGroup(sum);
      ++count;
    }
  }
  return count;
}

}  // namespace mrcnn::model
