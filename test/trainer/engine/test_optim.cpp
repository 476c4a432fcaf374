#include <torch/torch.h>

#include <catch2/catch.hpp>

#include "trainer/engine/solver/grad_scaler.h"
#include "trainer/engine/solver/novograd.h"
#include "trainer/engine/solver/sgd.h"

using namespace mrcnn::engine;

namespace {

// conv (4-D weight + bias), norm (1-D weight + bias), linear: the three parameter kinds.
std::vector<std::pair<std::string, torch::Tensor>> MakeParams(int64_t seed) {
  torch::manual_seed(seed);
  return {{"conv.weight", torch::randn({4, 3, 3, 3}).requires_grad_()},
          {"conv.bias", torch::randn({4}).requires_grad_()},
          {"gn.weight", torch::randn({4}).requires_grad_()},
          {"gn.bias", torch::randn({4}).requires_grad_()},
          {"fc.weight", torch::randn({2, 4}).requires_grad_()}};
}

torch::Tensor Loss(const std::vector<std::pair<std::string, torch::Tensor>>& p, const torch::Tensor& x) {
  auto y = torch::conv2d(x, p[0].second, p[1].second);
  y = torch::group_norm(y, 2, p[2].second, p[3].second);
  y = y.mean({2, 3});
  return torch::linear(y, p[4].second).pow(2).sum();
}

std::vector<std::pair<std::string, torch::Tensor>> CloneParams(
    const std::vector<std::pair<std::string, torch::Tensor>>& p) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& [n, t] : p) out.emplace_back(n, t.detach().clone().requires_grad_());
  return out;
}

}  // namespace

TEST_CASE("parameter kinds: norm, bias, weight", "[optim]") {
  auto kinds = ClassifyParameters(MakeParams(0));
  CHECK(kinds.at("conv.weight") == ParamKind::kWeight);
  CHECK(kinds.at("conv.bias") == ParamKind::kBias);
  CHECK(kinds.at("gn.weight") == ParamKind::kNorm);
  CHECK(kinds.at("gn.bias") == ParamKind::kNormBias);
  CHECK(kinds.at("fc.weight") == ParamKind::kWeight);
}

TEST_CASE("Sgd equals torch::optim::SGD with the same per-group settings", "[optim]") {
  for (bool nesterov : {false, true}) {
    INFO("nesterov " << nesterov);
    auto ours = MakeParams(1);
    auto theirs = MakeParams(1);
    SgdOptions o;
    o.momentum = 0.9;
    o.nesterov = nesterov;
    o.weight_decay = 1e-2;
    o.weight_decay_norm = 0.0;
    o.weight_decay_bias = 5e-3;
    o.bias_lr_factor = 2.0;
    Sgd sgd(ours, o);
    const double lr = 0.05;
    auto group = [&](std::vector<int> idx, double wd, double lr_factor) {
      std::vector<torch::Tensor> ps;
      for (int i : idx) ps.push_back(theirs[static_cast<size_t>(i)].second);
      return torch::optim::OptimizerParamGroup(
          ps, std::make_unique<torch::optim::SGDOptions>(
                  torch::optim::SGDOptions(lr * lr_factor).momentum(0.9).nesterov(nesterov).weight_decay(wd)));
    };
    // With WEIGHT_DECAY_BIAS set, a norm layer's bias is a bias (Detectron2's override order).
    torch::optim::SGD reference({group({0, 4}, 1e-2, 1.0), group({1, 3}, 5e-3, 2.0), group({2}, 0.0, 1.0)},
                                torch::optim::SGDOptions(lr));
    torch::manual_seed(7);
    for (int step = 0; step < 5; ++step) {
      auto x = torch::randn({2, 3, 6, 6});
      sgd.ZeroGrad();
      Loss(ours, x).backward();
      sgd.Step(lr);
      reference.zero_grad();
      Loss(theirs, x).backward();
      reference.step();
    }
    for (size_t i = 0; i < ours.size(); ++i) {
      INFO(ours[i].first);
      CHECK(torch::allclose(ours[i].second, theirs[i].second, 1e-6, 1e-7));
    }
  }
}

TEST_CASE("Sgd state round trip continues identically", "[optim]") {
  auto a = MakeParams(2);
  Sgd first(a, SgdOptions{});
  torch::manual_seed(3);
  auto x1 = torch::randn({2, 3, 6, 6});
  auto x2 = torch::randn({2, 3, 6, 6});
  Loss(a, x1).backward();
  first.Step(0.1);
  auto state = first.State();
  CHECK(state.size() == 5);
  CHECK(state.count("optimizer/momentum/gn.bias") == 1);

  // A copy of the parameters plus the saved state must take the same second step.
  auto b = CloneParams(a);
  Sgd second(b, SgdOptions{});
  second.LoadState(state);
  first.ZeroGrad();
  Loss(a, x2).backward();
  first.Step(0.1);
  Loss(b, x2).backward();
  second.Step(0.1);
  for (size_t i = 0; i < a.size(); ++i) CHECK(torch::equal(a[i].second, b[i].second));

  CHECK_THROWS_WITH(second.LoadState({{"optimizer/momentum/nope", torch::zeros({1})}}), Catch::Contains("nope"));
  CHECK_THROWS_WITH(second.LoadState({{"optimizer/momentum/gn.bias", torch::zeros({5})}}), Catch::Contains("shape"));
}

TEST_CASE("grad scaler: skip on overflow, back off, grow after an interval", "[optim]") {
  GradScaler scaler(true, 1024.0, 2.0, 0.5, 3);
  auto p = torch::ones({3}).requires_grad_();
  scaler.Scale((p * 2).sum()).backward();
  CHECK(p.grad()[0].item<double>() == 2048.0);
  torch::Tensor found_inf = scaler.Unscale({p});
  CHECK(found_inf.sizes() == torch::IntArrayRef{1});
  CHECK(found_inf.item<float>() == 0);
  CHECK(p.grad()[0].item<double>() == 2.0);
  scaler.Update(found_inf);
  CHECK(scaler.growth_tracker() == 1);
  p.mutable_grad() = torch::tensor({1.0f, INFINITY, 0.0f});
  found_inf = scaler.Unscale({p});
  CHECK(found_inf.item<float>() == 1);
  scaler.Update(found_inf);
  CHECK(scaler.scale() == 512.0);
  CHECK(scaler.growth_tracker() == 0);
  p.mutable_grad() = torch::tensor({NAN, 0.0f, 0.0f});  // NaN counts as an overflow too
  CHECK(scaler.Unscale({p}).item<float>() == 1);
  const torch::Tensor finite = torch::zeros({1});
  for (int i = 0; i < 2; ++i) scaler.Update(finite);
  CHECK(scaler.scale() == 512.0);
  CHECK(scaler.growth_tracker() == 2);
  scaler.Update(finite);  // the third good step in a row doubles it
  CHECK(scaler.scale() == 1024.0);
  CHECK(scaler.growth_tracker() == 0);
  scaler.Update(finite);

  GradScaler restored(true);
  restored.LoadState(scaler.State());
  CHECK(restored.scale() == 1024.0);
  CHECK(restored.growth_tracker() == 1);
  CHECK(scaler.State().at("scaler/scale").scalar_type() == torch::kDouble);  // the file's format

  GradScaler off(false);
  CHECK(off.scale() == 1.0);
  p.mutable_grad() = torch::tensor({NAN, 0.0f, 0.0f});
  CHECK_FALSE(off.Unscale({p}).defined());  // disabled: never skips (bf16/fp32 need no scaling)
}

namespace {

std::unique_ptr<Optimizer> MakeOptimizer(const std::string& kind,
                                         const std::vector<std::pair<std::string, torch::Tensor>>& p) {
  if (kind == "sgd") {
    SgdOptions o;
    o.nesterov = true;
    return std::make_unique<Sgd>(p, o);
  }
  NovoGradOptions o;
  o.groups.weight_decay = 1e-3;
  return std::make_unique<NovoGrad>(p, o);
}

}  // namespace

// The device-side skip of fp16 training: Step(flag 0) must be Step() exactly (the resume
// tests compare runs bit for bit), and Step(flag 1) must leave parameters and state alone,
// also before the first applied step, when the state does not exist yet.
TEST_CASE("Step(found_inf): a 0 flag equals Step() bit for bit, a 1 flag changes nothing", "[optim]") {
  for (const std::string kind : {"sgd", "novograd"}) {
    INFO(kind);
    auto plain = MakeParams(4);
    auto flagged = CloneParams(plain);
    auto opt_plain = MakeOptimizer(kind, plain);
    auto opt_flagged = MakeOptimizer(kind, flagged);
    opt_plain->set_lr(0.05);
    opt_flagged->set_lr(0.05);
    const torch::Tensor keep = torch::zeros({1}), skip = torch::ones({1});
    auto overflow = [&] {  // an overflowed step's gradients, then a skipped update
      const auto before = CloneParams(flagged);
      for (auto& [n, p] : flagged) p.mutable_grad() = torch::full_like(p, NAN);
      flagged[0].second.mutable_grad().view(-1)[0] = INFINITY;
      opt_flagged->Step(skip);
      opt_flagged->ZeroGrad();
      for (size_t i = 0; i < flagged.size(); ++i) CHECK(torch::equal(flagged[i].second, before[i].second));
    };
    overflow();
    CHECK(opt_flagged->State().empty() == (kind == "novograd"));  // nothing applied yet
    torch::manual_seed(11);
    for (int step = 0; step < 4; ++step) {
      auto x = torch::randn({2, 3, 6, 6});
      Loss(plain, x).backward();
      opt_plain->Step();
      opt_plain->ZeroGrad();
      Loss(flagged, x).backward();
      opt_flagged->Step(keep);
      opt_flagged->ZeroGrad();
      if (step == 1) overflow();
      for (size_t i = 0; i < plain.size(); ++i) {
        INFO("step " << step << " " << plain[i].first);
        CHECK(torch::equal(plain[i].second, flagged[i].second));
      }
    }
    const auto a = opt_plain->State(), b = opt_flagged->State();
    REQUIRE(a.size() == b.size());
    for (const auto& [k, v] : a) {
      INFO(k);
      CHECK(torch::equal(v, b.at(k)));
    }
  }
}
