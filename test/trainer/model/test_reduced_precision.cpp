// The CPU precision modes (issues 25 and 54): FastConv in bf16 mode runs in bf16 (maps past the
// Winograd cut-over) and stays within bf16's rounding of the float32 result, scopes nest and
// restore, bf16 weight copies follow in-place weight updates, the model's dense stages really
// run in bf16 while its outputs stay float32, fp32 is the modules' own result and fp32-fast
// Winograd's, the fused oneDNN epilogues (ReLU, residual add, the mask deconvolution) equal the
// unfused results, and precision names resolve per device.
#include <ATen/autocast_mode.h>
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <cmath>

#include "trainer/model/backbone/fast_conv.h"
#include "trainer/model/backbone/onednn_fused_conv.h"
#include "trainer/model/inference/inference_state.h"
#include "trainer/model/meta_arch/meta_arch.h"
#include "trainer/model/parts.h"

using namespace mrcnn::model;

namespace {

// Largest difference relative to the reference's largest magnitude.
double RelativeError(const at::Tensor& got, const at::Tensor& want) {
  return (got.to(at::kFloat) - want).abs().max().item<double>() / want.abs().max().item<double>();
}

ModelConfig TinyReducedPrecisionConfig() {
  ModelConfig c;
  c.backbone = "resnet18";
  c.num_classes = 3;
  c.min_size_test = 480;  // P2 of 120×160 is past the Winograd cut-over: bf16
  c.max_size_test = 640;
  c.fpn_out_channels = 32;
  c.box_fc_dim = 64;
  c.mask_conv_dim = 32;
  return c;
}

}  // namespace

TEST_CASE("FastConv in bf16 mode runs in bf16 within bf16 rounding of float32", "[bf16]") {
  torch::manual_seed(3);
  torch::NoGradGuard no_grad;
  auto conv = torch::nn::Conv2d(torch::nn::Conv2dOptions(32, 48, 3).padding(1).bias(false));
  auto norm = std::make_shared<FrozenBatchNorm2d>(48, 1e-5);
  norm->Buffers()[0].uniform_(0.5, 1.5);   // weight
  norm->Buffers()[1].uniform_(-0.2, 0.2);  // bias
  FastConv fast(conv, norm);
  // 2×80×100 positions: above the size up to which 3×3 layers keep fp32 Winograd.
  const at::Tensor x = torch::randn({2, 32, 80, 100});
  const at::Tensor reference = torch::relu(norm->forward(conv->forward(x)));

  const at::Tensor fp32 = fast.Forward(x, /*relu=*/true);
  CHECK(fp32.scalar_type() == at::kFloat);
  CHECK(RelativeError(fp32, reference) < 1e-4);
  {
    const CpuPrecisionScope scope(CpuDenseMode::kBf16);
    const at::Tensor bf16 = fast.Forward(x, /*relu=*/true);
    CHECK(bf16.scalar_type() == at::kBFloat16);
    CHECK(bf16.is_contiguous(at::MemoryFormat::ChannelsLast));
    const double error = RelativeError(bf16, reference);
    CHECK(error > 0.0);   // it did round: not the float32 path
    CHECK(error < 2e-2);  // 8-bit mantissa on inputs and weights, float accumulation
    {
      const CpuPrecisionScope inner(CpuDenseMode::kFp32);
      CHECK(fast.Forward(x).scalar_type() == at::kFloat);
    }
    CHECK(fast.Forward(x).scalar_type() == at::kBFloat16);  // the outer scope is back
  }
  CHECK(fast.Forward(x).scalar_type() == at::kFloat);
}

// Issue 54: precision fp32 must give torchvision's numbers, so it runs the modules themselves;
// fp32-fast's Winograd F(6×6) rounds ~10-30× more than a direct convolution.
TEST_CASE("FastConv at fp32 is the modules' own result; fp32-fast is Winograd's", "[winograd]") {
  torch::manual_seed(6);
  torch::NoGradGuard no_grad;
  auto conv = torch::nn::Conv2d(torch::nn::Conv2dOptions(64, 64, 3).padding(1).bias(false));
  auto norm = std::make_shared<FrozenBatchNorm2d>(64, 1e-5);
  norm->Buffers()[0].uniform_(0.5, 1.5);
  norm->Buffers()[1].uniform_(-0.2, 0.2);
  FastConv fast(conv, norm);
  // 60×80: 140 tiles of 6×6, so fp32-fast runs F(6×6) (fast_conv.cpp TileFor).
  const at::Tensor x = torch::randn({1, 64, 60, 80});
  const at::Tensor modules = torch::relu(norm->forward(conv->forward(x)));
  CHECK(torch::equal(fast.Forward(x, /*relu=*/true), modules));
  {
    const CpuPrecisionScope scope(CpuDenseMode::kFp32);  // as InferenceModel sets it
    CHECK(torch::equal(fast.Forward(x, /*relu=*/true), modules));
  }
  auto [scale, shift] = norm->ScaleShift();
  const at::Tensor exact =
      torch::relu(at::conv2d(x.to(at::kDouble), conv->weight.to(at::kDouble), {}, 1, 1) *
                      scale.to(at::kDouble).reshape({1, -1, 1, 1}) +
                  shift.to(at::kDouble).reshape({1, -1, 1, 1}));
  auto error = [&](const at::Tensor& y) {
    return ((y.to(at::kDouble) - exact).abs().max() / exact.abs().max()).item<double>();
  };
  double winograd = 0.0;
  {
    const CpuPrecisionScope scope(CpuDenseMode::kFp32Fast);
    const at::Tensor y = fast.Forward(x, /*relu=*/true);
    CHECK(y.scalar_type() == at::kFloat);
    winograd = error(y);
  }
  INFO("relative error: modules " << error(modules) << ", fp32-fast " << winograd);
  CHECK(winograd > 3.0 * error(modules));  // the large tiles did run
  CHECK(winograd < 1e-4);
}

TEST_CASE("the mask predictor's label logits equal its full output's, in every CPU mode",
          "[bf16]") {
  torch::manual_seed(7);
  torch::NoGradGuard no_grad;
  MaskRcnnPredictor predictor(32, 24, 5);
  const at::Tensor x = torch::randn({6, 32, 14, 14}).relu_();
  const at::Tensor labels = torch::tensor({1, 4, 2, 2, 3, 1}, torch::kLong);
  const at::Tensor reference =
      predictor.Forward(x).index({torch::arange(6, torch::kLong), labels});  // N×28×28
  CHECK(reference.sizes() == at::IntArrayRef({6, 28, 28}));
  CHECK(torch::equal(predictor.LabelLogits(x, labels), reference));  // fp32: Forward itself
  {
    const CpuPrecisionScope scope(CpuDenseMode::kFp32Fast);  // the GEMM per RoI
    CHECK(RelativeError(predictor.LabelLogits(x, labels), reference) < 1e-5);
  }
  {
    const CpuPrecisionScope scope(CpuDenseMode::kBf16);  // oneDNN's 1×1 convolution
    const at::Tensor bf16 = predictor.LabelLogits(x, labels);
    CHECK(bf16.scalar_type() == at::kBFloat16);
    CHECK(bf16.sizes() == reference.sizes());
    const double error = RelativeError(bf16, reference);
    CHECK(error > 0.0);
    CHECK(error < 2e-2);
    // A pixel layout mistake would move whole rows or columns: each pixel must track its own.
    const at::Tensor per_pixel = (bf16.to(at::kFloat) - reference).abs();
    CHECK(per_pixel.max().item<double>() < 0.05 * reference.abs().max().item<double>());
  }
}

TEST_CASE("a residual block's output is the same with or without the fused residual add",
          "[bf16]") {
  torch::manual_seed(8);
  torch::NoGradGuard no_grad;
  auto conv = torch::nn::Conv2d(torch::nn::Conv2dOptions(32, 48, 1).bias(true));
  FastConv fast(conv);
  const at::Tensor x = torch::randn({2, 32, 90, 120});
  const at::Tensor residual = torch::randn({2, 48, 90, 120});
  const at::Tensor reference = torch::relu(conv->forward(x) + residual);
  const CpuPrecisionScope scope(CpuDenseMode::kBf16);
  const at::Tensor held =
      residual.to(at::kBFloat16).contiguous(at::MemoryFormat::ChannelsLast);  // still ours
  const at::Tensor before = held.clone();
  const at::Tensor fused = fast.ForwardAdd(x, held, /*relu=*/true);
  CHECK(torch::equal(held, before));  // a tensor someone else holds is not overwritten
  CHECK(fused.scalar_type() == at::kBFloat16);
  CHECK(RelativeError(fused, reference) < 2e-2);
  CHECK(fused.min().item<float>() >= 0.0f);
  // A temporary moved in takes the result in its own memory.
  at::Tensor temporary = held.clone(at::MemoryFormat::ChannelsLast);
  const void* memory = temporary.data_ptr();
  const at::Tensor in_place = fast.ForwardAdd(x, std::move(temporary), /*relu=*/true);
  CHECK(in_place.data_ptr() == memory);
  CHECK(torch::equal(in_place, fused));
}

TEST_CASE("ReluBf16InPlace is max(x, 0) and keeps NaN", "[bf16]") {
  at::Tensor t =
      torch::tensor({-2.5f, -0.0f, 0.0f, 1.5f, -1e-30f, std::nanf(""), -INFINITY, INFINITY})
          .to(at::kBFloat16);
  ReluBf16InPlace(t);
  const at::Tensor f = t.to(at::kFloat);
  CHECK(f[0].item<float>() == 0.0f);
  CHECK(!std::signbit(f[1].item<float>()));
  CHECK(f[3].item<float>() == 1.5f);
  CHECK(f[4].item<float>() == 0.0f);
  CHECK(std::isnan(f[5].item<float>()));
  CHECK(f[6].item<float>() == 0.0f);
  CHECK(std::isinf(f[7].item<float>()));
  at::Tensor planar = torch::randn({3, 8, 5, 7}).to(at::kBFloat16);
  const at::Tensor expected = torch::relu(planar.to(at::kFloat));
  at::Tensor cl = planar.contiguous(at::MemoryFormat::ChannelsLast);
  ReluBf16InPlace(cl);
  CHECK(torch::equal(cl.to(at::kFloat), expected));
  at::Tensor strided = planar.slice(3, 0, 7, 2);
  CHECK_THROWS_WITH(ReluBf16InPlace(strided), Catch::Contains("dense bf16"));
}

// Issue 39: under autocast the modules' path leaves every frozen norm's output float32 (its
// float32 scale promotes the bf16 convolution's output); inside the convolution the output
// stays bf16, and training gets the gradients the modules' path gets under the same autocast
// (both within bf16 rounding of the float32 ones).
namespace {

struct Gradients {
  at::Tensor out, weight, input;
};

// relu(norm(conv(x))) forward and backward, through the modules or through FastConv,
// under CPU autocast (bf16) or not.
Gradients RunConvNorm(torch::nn::Conv2d& conv, FrozenBatchNorm2d& norm, FastConv* fast,
                      const at::Tensor& x0, const at::Tensor& upstream, bool autocast) {
  conv->weight.mutable_grad() = at::Tensor();
  const at::Tensor x = x0.clone().requires_grad_(true);
  at::autocast::set_autocast_enabled(at::kCPU, autocast);
  at::autocast::set_autocast_dtype(at::kCPU, at::kBFloat16);
  at::Tensor y =
      fast ? fast->Forward(x, /*relu=*/true) : torch::relu(norm.forward(conv->forward(x)));
  at::autocast::set_autocast_enabled(at::kCPU, false);
  at::autocast::clear_cache();
  y.backward(upstream.to(y.scalar_type()));
  return {y.detach(), conv->weight.grad().clone(), x.grad().clone()};
}

}  // namespace

TEST_CASE("under autocast a frozen norm runs inside the convolution, gradients intact", "[bf16]") {
  torch::manual_seed(6);
  auto conv =
      torch::nn::Conv2d(torch::nn::Conv2dOptions(16, 24, 3).stride(2).padding(1).bias(false));
  auto norm = std::make_shared<FrozenBatchNorm2d>(24, 1e-5);
  {
    torch::NoGradGuard no_grad;
    norm->Buffers()[0].uniform_(0.5, 1.5);   // weight
    norm->Buffers()[1].uniform_(-0.2, 0.2);  // bias
    norm->Buffers()[2].uniform_(-0.3, 0.3);  // running_mean
    norm->Buffers()[3].uniform_(0.5, 2.0);   // running_var
  }
  FastConv fast(conv, norm);
  const at::Tensor x0 = torch::randn({2, 16, 20, 24});
  const at::Tensor upstream = torch::randn({2, 24, 10, 12});

  const Gradients want = RunConvNorm(conv, *norm, nullptr, x0, upstream, false);  // float32
  const Gradients modules = RunConvNorm(conv, *norm, nullptr, x0, upstream, true);
  const Gradients inside = RunConvNorm(conv, *norm, &fast, x0, upstream, true);
  CHECK(modules.out.scalar_type() == at::kFloat);  // what issue 39 measured on the GPU
  CHECK(inside.out.scalar_type() == at::kBFloat16);
  CHECK(inside.weight.scalar_type() == at::kFloat);  // the parameter's own gradient
  CHECK(RelativeError(inside.out, want.out) < 2e-2);
  // bf16 backward rounds its products: the float32 reference is a few percent away for both.
  const double modules_dw = RelativeError(modules.weight, want.weight);
  const double modules_dx = RelativeError(modules.input, want.input);
  const double inside_dw = RelativeError(inside.weight, want.weight);
  const double inside_dx = RelativeError(inside.input, want.input);
  CAPTURE(modules_dw, modules_dx, inside_dw, inside_dx);
  CHECK(inside_dw < 2.0 * modules_dw + 1e-2);
  CHECK(inside_dx < 2.0 * modules_dx + 1e-2);
  CHECK(inside_dw < 0.2);
  CHECK(inside_dx < 0.2);
  // Both bf16 paths agree far better with each other than a wrong scale would.
  CHECK(RelativeError(inside.weight, modules.weight) < 0.2);
  CHECK(!norm->Buffers()[0].requires_grad());  // the norm stays frozen

  // New statistics (a checkpoint loaded in place) are used by the next call.
  {
    torch::NoGradGuard no_grad;
    norm->Buffers()[1].add_(5.0);
    at::autocast::set_autocast_enabled(at::kCPU, true);
    const at::Tensor shifted = fast.Forward(x0);
    at::autocast::set_autocast_enabled(at::kCPU, false);
    at::autocast::clear_cache();
    CHECK(RelativeError(shifted, norm->forward(conv->forward(x0))) < 2e-2);
  }
}

TEST_CASE("bf16 weight copies follow in-place weight updates", "[bf16]") {
  torch::manual_seed(4);
  auto conv = torch::nn::Conv2d(torch::nn::Conv2dOptions(8, 8, 1).bias(true));
  FastConv fast(conv);
  const at::Tensor x = torch::randn({1, 8, 6, 6});
  torch::NoGradGuard no_grad;
  const CpuPrecisionScope scope(CpuDenseMode::kBf16);
  const at::Tensor before = fast.Forward(x).to(at::kFloat);
  conv->weight.mul_(2.0);  // as an optimizer step does between two evaluations
  conv->bias.mul_(2.0);
  const at::Tensor after = fast.Forward(x).to(at::kFloat);
  CHECK(RelativeError(after, before * 2.0) < 2e-2);

  Bf16Copies copies;
  const at::Tensor w = torch::ones({4});
  CHECK(copies.Of({w})[0].scalar_type() == at::kBFloat16);
  w.add_(1.0);
  CHECK(copies.Of({w})[0][0].item<float>() == 2.0f);
}

TEST_CASE("the model's dense stages run in bf16 and its detections stay float32", "[bf16]") {
  torch::manual_seed(5);
  auto model = BuildModel(TinyReducedPrecisionConfig());
  model->eval();
  torch::NoGradGuard no_grad;
  const at::Tensor image = torch::rand({3, 480, 640});
  const CpuPrecisionScope scope(CpuDenseMode::kBf16);
  const ImageBatch batch = model->Transform({image}, nullptr);
  const std::vector<at::Tensor> features = model->Features(batch.tensors);
  CHECK(features.front().scalar_type() == at::kBFloat16);  // P2: oneDNN bf16
  // P5 (15×20): fp32 Winograd, unless AMX makes bf16 faster at every size.
  CHECK(features[3].scalar_type() == (CpuHasAmxBf16() ? at::kBFloat16 : at::kFloat));
  model->detection_settings().score_thresh = 0.0;
  const auto out = TakeInstances(model->forward({image}));
  REQUIRE(out.size() == 1);
  const ImageResult& r = out[0];
  CHECK(r.boxes.scalar_type() == at::kFloat);
  CHECK(r.scores.scalar_type() == at::kFloat);
  CHECK(r.boxes.size(0) > 0);
  REQUIRE(r.masks.defined());
  CHECK(r.masks.scalar_type() == at::kFloat);
  CHECK(r.masks.size(2) == 480);
  CHECK(r.masks.size(3) == 640);
}

TEST_CASE("precision names resolve per device", "[bf16]") {
  CHECK(ResolvePrecision("auto", /*cuda=*/true) == "fp32");
  CHECK(ResolvePrecision("auto", false) == (CpuHasFastBf16() ? "bf16" : "fp32-fast"));
  CHECK(ResolvePrecision("fp32-fast", false) == "fp32-fast");
  CHECK_THROWS_WITH(ResolvePrecision("fp32-fast", true), Catch::Contains("CPU"));
  CHECK(CpuDenseModeOf("fp32") == CpuDenseMode::kFp32);
  CHECK(CpuDenseModeOf("fp32-fast") == CpuDenseMode::kFp32Fast);
  CHECK(CpuDenseModeOf("bf16") == CpuDenseMode::kBf16);
  CHECK(CpuDenseModeOf("fp16") == CpuDenseMode::kFp32);
  CHECK(ResolvePrecision("bf16", false) == "bf16");
  CHECK(ResolvePrecision("fp16", true) == "fp16");
  CHECK_THROWS_WITH(ResolvePrecision("fp16", false), Catch::Contains("CUDA"));
  CHECK_THROWS_WITH(ResolvePrecision("fp8", false),
                    Catch::Contains("auto, fp32, fp32-fast, fp16 or bf16"));
}

// Last in this file: it turns the fused ops off for the rest of the process.
TEST_CASE("the unfused fallback gives the fused results up to bf16 rounding", "[bf16]") {
  torch::manual_seed(9);
  torch::NoGradGuard no_grad;
  auto conv = torch::nn::Conv2d(torch::nn::Conv2dOptions(32, 48, 3).padding(1).bias(true));
  FastConv fast(conv);
  const at::Tensor x = torch::randn({2, 32, 90, 120});
  const at::Tensor residual =
      torch::randn({2, 48, 90, 120}).to(at::kBFloat16).contiguous(at::MemoryFormat::ChannelsLast);
  MaskRcnnPredictor predictor(32, 24, 5);
  const at::Tensor rois = torch::randn({4, 32, 14, 14}).relu_();
  const at::Tensor labels = torch::tensor({1, 4, 2, 3}, torch::kLong);
  const CpuPrecisionScope scope(CpuDenseMode::kBf16);
  auto run = [&] {
    return std::vector<at::Tensor>{fast.Forward(x, /*relu=*/true).to(at::kFloat),
                                   fast.ForwardAdd(x, residual, /*relu=*/true).to(at::kFloat),
                                   predictor.LabelLogits(rois, labels).to(at::kFloat)};
  };
  // x86 libtorch has the fused ops; a CPU whose oneDNN rejects a bf16 post-op (an AVX2-only
  // one, say) has turned them off in an earlier test, and then both runs are the fallback.
  if (!OneDnnFusedConvAvailable())
    WARN(
        "oneDNN's fused bf16 convolutions are off on this CPU: comparing the fallback with itself");
  const std::vector<at::Tensor> fused = run();
  DisableOneDnnFusedConv();
  CHECK_FALSE(OneDnnFusedConvAvailable());
  const std::vector<at::Tensor> unfused = run();
  for (size_t i = 0; i < fused.size(); ++i) {
    INFO("output " << i);
    CHECK(RelativeError(unfused[i], fused[i]) < 2e-2);
    CHECK(unfused[i].min().item<float>() >= (i < 2 ? 0.0f : -1e9f));
  }
}
