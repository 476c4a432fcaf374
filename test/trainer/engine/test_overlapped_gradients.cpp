// The gradient average overlapped with backward (DIST.OVERLAP_BACKWARD) against the
// post-backward reference: two ranks on threads, each with its own DataParallel (c10d
// TCPStore rendezvous and the TCP ring over loopback), train a small model for 3
// iterations of 2 accumulated micro-batches with fp16-style loss scaling (a scaler enabled
// on CPU), clipping and an SGD update, the step's order of train_step.cpp. The model has a
// parameter no backward reaches, one that does not require a gradient and one used on a
// different micro-batch per rank (so its gradient is final during the last backward on
// one rank and only after it on the other); in iteration 2 one rank's gradient overflows.
// Both paths must give bit-identical averaged gradients and weights on both ranks, the
// first iteration's average must equal the mean of locally computed gradients, and the
// overlapped path's trace must show buckets launched in order during backward.
#include <torch/torch.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "test/trainer/engine/temp_dir.h"
#include "test/trainer/engine/thread_ranks.h"
#include "trainer/engine/distributed/data_parallel.h"
#include "trainer/engine/solver/grad_scaler.h"

using mrcnn::engine::GradScaler;
using mrcnn::engine::dist::DataParallel;
using mrcnn::engine::dist::DataParallelOptions;

namespace {

constexpr int kWorld = 2, kIterations = 3, kMicro = 2;
constexpr double kScale = 1024.0;  // a power of two: scaling and unscaling are exact

// Registration order (the optimizer's): the layout packs it in reverse, so `big` is bucket 0
// and the parameters that get no gradient in the last backward are in the last buckets.
enum Param { kUnused, kFrozen, kLate, kW1, kB1, kW2, kB2, kBig, kNumParams };

struct Inputs {
  torch::Tensor x[kWorld][kIterations][kMicro];
  torch::Tensor c[kWorld][kIterations][kMicro];
};

// Its own generator: both rank threads call it at once, and the global one would interleave
// their draws (the ranks then started from different weights, now and then).
std::vector<torch::Tensor> InitialParams() {
  at::Generator gen = at::detail::createCPUGenerator(3);
  std::vector<torch::Tensor> p(kNumParams);
  const auto randn = [&](int64_t a, int64_t b = -1) {
    return b < 0 ? torch::randn({a}, gen) : torch::randn({a, b}, gen);
  };
  p[kUnused] = randn(3);
  p[kFrozen] = randn(2);
  p[kLate] = randn(5);
  p[kW1] = randn(16, 8);
  p[kB1] = randn(16);
  p[kW2] = randn(4, 16);
  p[kB2] = randn(4);
  p[kBig] = randn(3000);
  return p;
}

Inputs MakeInputs() {
  torch::manual_seed(5);
  Inputs in;
  for (int r = 0; r < kWorld; ++r) {
    for (int i = 0; i < kIterations; ++i) {
      for (int m = 0; m < kMicro; ++m) {
        in.x[r][i][m] = torch::randn({6, 8});
        in.c[r][i][m] = torch::randn({3000});
      }
    }
  }
  in.c[1][1][1][0] = std::numeric_limits<float>::infinity();  // rank 1 overflows in iteration 2
  return in;
}

// The loss of one micro-batch; `late` is used on micro-batch 0 on rank 0 and on
// micro-batch 1 (the last) on rank 1.
torch::Tensor Loss(const std::vector<torch::Tensor>& p, const Inputs& in, int rank, int it, int m) {
  const torch::Tensor h = torch::relu(torch::linear(in.x[rank][it][m], p[kW1], p[kB1]));
  torch::Tensor loss =
      torch::linear(h, p[kW2], p[kB2]).pow(2).mean() + (p[kBig] * in.c[rank][it][m]).sum() * 1e-3;
  if (m == rank)
    loss = loss + p[kLate].pow(2).sum();
  return loss;
}

struct RankResult {
  std::vector<std::vector<torch::Tensor>> averaged;  // per iteration, right after the average
  std::vector<bool> finite;                          // per iteration, the scaler's verdict
  std::vector<torch::Tensor> final_params;
  double final_scale = 0;
};

// One rank's training, the order of TrainStep: ExpectFinalBackward before the last
// backward, average, unscale, clip, step, scaler update, gradients reset to undefined.
RankResult TrainRank(DataParallel& dp, const Inputs& in) {
  std::vector<torch::Tensor> p;
  for (const torch::Tensor& t : InitialParams())
    p.push_back(t.clone().requires_grad_(true));
  p[kFrozen].requires_grad_(false);
  GradScaler scaler(true, kScale);
  RankResult out;
  for (int it = 0; it < kIterations; ++it) {
    for (int m = 0; m < kMicro; ++m) {
      if (m == kMicro - 1)
        dp.ExpectFinalBackward(p);
      scaler.Scale(Loss(p, in, dp.rank(), it, m) / kMicro).backward();
    }
    dp.AverageGradients(p);
    std::vector<torch::Tensor> averaged;
    for (const torch::Tensor& t : p)
      averaged.push_back(t.grad().clone());
    out.averaged.push_back(averaged);
    const torch::Tensor found_inf = scaler.Unscale(p);
    const bool finite = found_inf.item<float>() == 0;
    out.finite.push_back(finite);
    if (finite) {
      torch::nn::utils::clip_grad_norm_(p, 1.0);
      torch::NoGradGuard no_grad;
      for (torch::Tensor& t : p)
        t.sub_(t.grad() * 0.1);
    }
    scaler.Update(found_inf);
    for (torch::Tensor& t : p)
      t.mutable_grad() = torch::Tensor();
  }
  for (const torch::Tensor& t : p)
    out.final_params.push_back(t.detach().clone());
  out.final_scale = scaler.scale();
  return out;
}

std::vector<RankResult> TrainWorld(bool overlap, const Inputs& in, const std::string& trace_dir) {
  std::vector<RankResult> results(kWorld);
  RunRanksInThreads(
      kWorld, [&](DataParallel& dp, int r) { results[static_cast<size_t>(r)] = TrainRank(dp, in); },
      [&](DataParallelOptions& o, int r) {
        o.bucket_bytes = 64 * sizeof(float);  // several buckets for this small model
        o.overlap_backward = overlap;
        if (overlap)
          o.bucket_trace_path = trace_dir + "/rank" + std::to_string(r) + ".txt";
      });
  return results;
}

bool BitEqual(const torch::Tensor& a, const torch::Tensor& b) {
  return a.sizes() == b.sizes() && std::memcmp(a.contiguous().data_ptr(), b.contiguous().data_ptr(),
                                               a.numel() * sizeof(float)) == 0;
}

// The first iteration's scaled, accumulated gradient of one rank, without any averaging.
std::vector<torch::Tensor> LocalGradients(const Inputs& in, int rank) {
  std::vector<torch::Tensor> p;
  for (const torch::Tensor& t : InitialParams())
    p.push_back(t.clone().requires_grad_(true));
  for (int m = 0; m < kMicro; ++m)
    (Loss(p, in, rank, 0, m) / kMicro * kScale).backward();
  std::vector<torch::Tensor> g;
  for (const torch::Tensor& t : p)
    g.push_back(t.grad().defined() ? t.grad() : torch::zeros_like(t));
  return g;
}

}  // namespace

TEST_CASE("gradients averaged during backward equal the post-backward average bit for bit",
          "[overlap]") {
  const Inputs in = MakeInputs();
  mrcnn::test::TempDir dir;
  std::filesystem::create_directories(dir.path);
  const std::vector<RankResult> post = TrainWorld(false, in, "");
  const std::vector<RankResult> overlap = TrainWorld(true, in, dir.path.string());

  for (int it = 0; it < kIterations; ++it) {
    INFO("iteration " << it + 1);
    // Rank 1's overflow reaches rank 0 through the average: both skip iteration 2.
    CHECK(overlap[0].finite[it] == (it != 1));
    CHECK(overlap[1].finite[it] == (it != 1));
    CHECK(post[0].finite[it] == (it != 1));
    for (int k = 0; k < kNumParams; ++k) {
      INFO("parameter " << k);
      const torch::Tensor& g = overlap[0].averaged[it][k];
      CHECK(BitEqual(g, overlap[1].averaged[it][k]));
      CHECK(BitEqual(g, post[0].averaged[it][k]));
      CHECK(BitEqual(g, post[1].averaged[it][k]));
    }
    CHECK(overlap[0].averaged[it][kUnused].abs().max().item<float>() == 0);
    CHECK(overlap[0].averaged[it][kLate].abs().max().item<float>() > 0);
  }
  CHECK(overlap[0].final_scale == kScale / 2);
  CHECK(overlap[1].final_scale == kScale / 2);
  const std::vector<torch::Tensor> initial = InitialParams();
  for (int k = 0; k < kNumParams; ++k) {
    INFO("parameter " << k);
    CHECK(BitEqual(overlap[0].final_params[k], overlap[1].final_params[k]));
    CHECK(BitEqual(overlap[0].final_params[k], post[0].final_params[k]));
  }
  CHECK(!BitEqual(overlap[0].final_params[kW1], initial[kW1]));  // training moved them

  // The first average is the mean of the two ranks' own accumulated gradients.
  const std::vector<torch::Tensor> g0 = LocalGradients(in, 0), g1 = LocalGradients(in, 1);
  for (int k = 0; k < kNumParams; ++k) {
    INFO("parameter " << k);
    CHECK(torch::allclose(overlap[0].averaged[0][k], (g0[k] + g1[k]) / 2, 1e-6, 1e-6));
  }

  // The trace of rank 0's first iteration: the layout, then readiness and launches.
  std::ifstream trace(dir.path / "rank0.txt");
  REQUIRE(trace.good());
  std::vector<size_t> launches;
  size_t launched_in_backward = 0, bucket_count = 0;
  bool backward_ended = false;
  std::vector<size_t> ready_in_backward;
  for (std::string line; std::getline(trace, line);) {
    std::istringstream words(line);
    std::string word;
    words >> word;
    size_t index = 0;
    words >> index;
    if (word == "bucket") {
      ++bucket_count;
    } else if (word == "launch") {
      launches.push_back(index);
      launched_in_backward += backward_ended ? 0 : 1;
    } else if (word == "backward_end") {
      backward_ended = true;
    } else if (word == "ready" && !backward_ended) {
      ready_in_backward.push_back(index);
    }
  }
  INFO("buckets " << bucket_count << ", launched during backward " << launched_in_backward);
  REQUIRE(bucket_count >= 4);
  REQUIRE(launches.size() == bucket_count);
  for (size_t b = 0; b < launches.size(); ++b)
    CHECK(launches[b] == b);
  CHECK(launched_in_backward >= 1);
  CHECK(launched_in_backward < bucket_count);  // the bucket holding `unused` waits for the end
  // Hooks fired for every parameter the last backward reached on rank 0, and no other.
  std::sort(ready_in_backward.begin(), ready_in_backward.end());
  CHECK(ready_in_backward == std::vector<size_t>{kW1, kB1, kW2, kB2, kBig});
}
