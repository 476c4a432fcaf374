// SyncBN (trainer/model/parts.h SyncBatchNorm2d) over two ranks of our ring, each in a thread:
// two processes of batch 1 give what one process of batch 2 gives through BatchNorm2d (the
// outputs, the input gradients, the summed weight and bias gradients, the running
// statistics), and a rank with an empty batch still takes part.
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <vector>

#include "test/trainer/engine/thread_ranks.h"
#include "trainer/model/parts.h"

using mrcnn::engine::dist::DataParallel;
using mrcnn::model::BatchNorm2d;
using mrcnn::model::SyncBatchNorm2d;

namespace {

constexpr int kWorld = 2;
constexpr int64_t kChannels = 3;

struct NormResult {
  at::Tensor output, input_grad, weight_grad, bias_grad, running_mean, running_var;
};

// One training step of `norm` on `x` against the loss sum(y * upstream), from weight and bias
// set to given values.
template <typename Norm>
NormResult Step(Norm& norm, const at::Tensor& x, const at::Tensor& upstream) {
  norm.train();
  {
    torch::NoGradGuard no_grad;
    norm.named_parameters()["weight"].copy_(torch::tensor({1.5f, 0.5f, -1.0f}));
    norm.named_parameters()["bias"].copy_(torch::tensor({0.25f, -0.5f, 0.0f}));
  }
  at::Tensor input = x.clone().requires_grad_(true);
  at::Tensor y = norm.forward(input);
  (y * upstream).sum().backward();
  auto params = norm.named_parameters();
  auto buffers = norm.named_buffers();
  return {y.detach(),
          input.grad().defined() ? input.grad() : torch::zeros_like(input),
          params["weight"].grad().clone(),
          params["bias"].grad().clone(),
          buffers["running_mean"].clone(),
          buffers["running_var"].clone()};
}

// Each rank's step on its slice of the images, with its own SyncBatchNorm2d in the group.
std::vector<NormResult> RunRanks(const std::vector<at::Tensor>& inputs,
                                 const std::vector<at::Tensor>& upstreams) {
  std::vector<NormResult> results(kWorld);
  RunRanksInThreads(kWorld, [&](DataParallel& dp, int r) {
    SyncBatchNorm2d norm(kChannels);
    norm.SetGroup([&dp](std::vector<double>& v) { dp.SumInPlace(v); });
    const auto i = static_cast<size_t>(r);
    results[i] = Step(norm, inputs[i], upstreams[i]);
  });
  return results;
}

bool Close(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && torch::allclose(a, b, 1e-5, 1e-5);
}

}  // namespace

TEST_CASE("SyncBN over two ranks of batch 1 equals BatchNorm over one batch of 2",
          "[sync-batch-norm][distributed]") {
  torch::manual_seed(4);
  const at::Tensor x = torch::randn({2, kChannels, 5, 7}) * 3 + 1;
  const at::Tensor upstream = torch::randn({2, kChannels, 5, 7});
  BatchNorm2d reference(kChannels);
  const NormResult one = Step(reference, x, upstream);
  const std::vector<NormResult> ranks = RunRanks(
      {x.slice(0, 0, 1), x.slice(0, 1, 2)}, {upstream.slice(0, 0, 1), upstream.slice(0, 1, 2)});
  for (int r = 0; r < kWorld; ++r) {
    INFO("rank " << r);
    const NormResult& got = ranks[static_cast<size_t>(r)];
    CHECK(Close(got.output, one.output.slice(0, r, r + 1)));
    CHECK(Close(got.input_grad, one.input_grad.slice(0, r, r + 1)));
    // Every rank keeps the global running statistics (the unbiased variance of all 70 values).
    CHECK(Close(got.running_mean, one.running_mean));
    CHECK(Close(got.running_var, one.running_var));
  }
  // The ranks' parameter gradients are summed by the gradient average (and divided by the
  // world size, as the loss is): their sum is the one batch's gradient.
  CHECK(Close(ranks[0].weight_grad + ranks[1].weight_grad, one.weight_grad));
  CHECK(Close(ranks[0].bias_grad + ranks[1].bias_grad, one.bias_grad));
  // Not a trivially equal case: each rank alone normalises differently.
  BatchNorm2d alone(kChannels);
  CHECK_FALSE(Close(Step(alone, x.slice(0, 0, 1), upstream.slice(0, 0, 1)).output,
                    one.output.slice(0, 0, 1)));
}

TEST_CASE("a rank with no rows still takes part in SyncBN's sums",
          "[sync-batch-norm][distributed]") {
  torch::manual_seed(5);
  const at::Tensor rows = torch::randn({4, kChannels, 3, 3});
  const at::Tensor upstream = torch::randn({4, kChannels, 3, 3});
  BatchNorm2d reference(kChannels);
  const NormResult one = Step(reference, rows, upstream);
  const std::vector<NormResult> ranks = RunRanks({rows, torch::empty({0, kChannels, 3, 3})},
                                                 {upstream, torch::empty({0, kChannels, 3, 3})});
  CHECK(Close(ranks[0].output, one.output));
  CHECK(Close(ranks[0].input_grad, one.input_grad));
  CHECK(ranks[1].output.size(0) == 0);
  CHECK(Close(ranks[1].running_mean, one.running_mean));
}
