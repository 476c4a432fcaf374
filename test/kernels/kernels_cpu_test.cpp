// CPU behaviour of the mrcnn ops through the public C++ API (kernels/ops.h):
// edge cases the randomised oracle tests rarely reach.
#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/ops.h"
#include "trainer/data/mask_rle.h"

namespace mk = mrcnn::kernels;

namespace {

at::Tensor Boxes(std::vector<float> v) {
  return at::tensor(v, at::kFloat).view({-1, 4});
}

std::vector<int64_t> ToVector(const at::Tensor& t) {
  const at::Tensor c = t.to(at::kLong).contiguous();
  return {c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel()};
}

// Greedy NMS in double, written independently of the kernel for cross-checking.
std::vector<int64_t> ReferenceNms(const at::Tensor& boxes, const at::Tensor& scores,
                                  const at::Tensor& classes, double thr) {
  const at::Tensor b = boxes.to(at::kDouble).contiguous();
  const at::Tensor order = std::get<1>(scores.sort(true, 0, true));
  const int64_t n = b.size(0);
  const double* p = b.data_ptr<double>();
  const int64_t* o = order.data_ptr<int64_t>();
  const at::Tensor cls = classes.to(at::kLong).contiguous();
  std::vector<bool> dead(n, false);
  std::vector<int64_t> keep;
  for (int64_t a = 0; a < n; ++a) {
    const int64_t i = o[a];
    if (dead[i])
      continue;
    keep.push_back(i);
    for (int64_t c = a + 1; c < n; ++c) {
      const int64_t j = o[c];
      if (cls.data_ptr<int64_t>()[i] != cls.data_ptr<int64_t>()[j])
        continue;
      const double w =
          std::max(0.0, std::min(p[4 * i + 2], p[4 * j + 2]) - std::max(p[4 * i], p[4 * j]));
      const double h = std::max(
          0.0, std::min(p[4 * i + 3], p[4 * j + 3]) - std::max(p[4 * i + 1], p[4 * j + 1]));
      const double ai = (p[4 * i + 2] - p[4 * i]) * (p[4 * i + 3] - p[4 * i + 1]);
      const double aj = (p[4 * j + 2] - p[4 * j]) * (p[4 * j + 3] - p[4 * j + 1]);
      if (w * h / (ai + aj - w * h) > thr)
        dead[j] = true;
    }
  }
  return keep;
}

}  // namespace

TEST_CASE("library registers every mrcnn op", "[kernels]") {
  CHECK(mk::RegisteredOpCount() == 23);
}

TEST_CASE("nms edge cases", "[kernels][nms]") {
  SECTION("no boxes") {
    const at::Tensor keep = mk::Nms(at::empty({0, 4}), at::empty({0}), 0.5);
    CHECK(keep.numel() == 0);
    CHECK(keep.scalar_type() == at::kLong);
  }
  SECTION("one box") {
    CHECK(ToVector(mk::Nms(Boxes({0, 0, 10, 10}), at::tensor({0.3f}), 0.5)) ==
          std::vector<int64_t>{0});
  }
  SECTION("identical boxes: all but the best suppressed") {
    const at::Tensor boxes = Boxes({0, 0, 10, 10}).repeat({5, 1});
    const at::Tensor scores = at::tensor({0.1f, 0.9f, 0.5f, 0.7f, 0.2f});
    CHECK(ToVector(mk::Nms(boxes, scores, 0.5)) == std::vector<int64_t>{1});
  }
  SECTION("identical scores keep the lower index first") {
    const at::Tensor boxes = Boxes({0, 0, 10, 10, 20, 20, 30, 30, 1, 1, 10, 10});
    const at::Tensor scores = at::full({3}, 0.5f);
    CHECK(ToVector(mk::Nms(boxes, scores, 0.5)) == std::vector<int64_t>{0, 1});
  }
  SECTION("degenerate and inverted boxes never suppress") {
    const at::Tensor boxes = Boxes({5, 5, 5, 5, 5, 5, 5, 5, 10, 10, 0, 0, 10, 10, 0, 0});
    const at::Tensor scores = at::tensor({0.9f, 0.8f, 0.7f, 0.6f});
    CHECK(ToVector(mk::Nms(boxes, scores, 0.5)).size() == 4);
  }
  SECTION("huge coordinates") {
    // Areas up to 1e30 still fit float: same answer as the double reference.
    const at::Tensor boxes =
        Boxes({0, 0, 1e15f, 1e15f, 0, 0, 1e15f, 9e14f, 5e14f, 5e14f, 2e15f, 2e15f});
    const at::Tensor scores = at::tensor({0.9f, 0.8f, 0.7f});
    CHECK(ToVector(mk::Nms(boxes, scores, 0.5)) ==
          ReferenceNms(boxes, scores, at::zeros({3}, at::kLong), 0.5));
    // Areas that overflow float make the IoU NaN (inf/inf), which never suppresses,
    // exactly as in torchvision's float kernel.
    const at::Tensor overflow = Boxes({0, 0, 1e30f, 1e30f, 0, 0, 1e30f, 1e30f});
    CHECK(ToVector(mk::Nms(overflow, at::tensor({0.9f, 0.8f}), 0.5)) == std::vector<int64_t>{0, 1});
  }
  SECTION("threshold is strict: IoU exactly at the threshold keeps the box") {
    // IoU of these two boxes is exactly 0.5.
    const at::Tensor boxes = Boxes({0, 0, 3, 1, 1, 0, 4, 1});
    const at::Tensor scores = at::tensor({0.9f, 0.8f});
    CHECK(ToVector(mk::Nms(boxes, scores, 0.5)) == std::vector<int64_t>{0, 1});
    CHECK(ToVector(mk::Nms(boxes, scores, 0.49)) == std::vector<int64_t>{0});
  }
  SECTION("random boxes agree with an independent double-precision reference") {
    at::manual_seed(3);
    for (int trial = 0; trial < 20; ++trial) {
      const at::Tensor xy = at::rand({300, 2}) * 100;
      const at::Tensor wh = at::rand({300, 2}) * 30 + 1;
      const at::Tensor boxes = at::cat({xy, xy + wh}, 1).round();  // integer: exact in float
      const at::Tensor scores = at::rand({300});
      CHECK(ToVector(mk::Nms(boxes, scores, 0.5)) ==
            ReferenceNms(boxes, scores, at::zeros({300}, at::kLong), 0.5));
    }
  }
}

TEST_CASE("batched nms keeps classes apart", "[kernels][nms]") {
  SECTION("no boxes") {
    CHECK(
        mk::BatchedNms(at::empty({0, 4}), at::empty({0}), at::empty({0}, at::kLong), 0.5).numel() ==
        0);
  }
  SECTION("identical boxes in different classes all survive, sorted by score") {
    const at::Tensor boxes = Boxes({0, 0, 10, 10}).repeat({4, 1});
    const at::Tensor scores = at::tensor({0.1f, 0.9f, 0.5f, 0.7f});
    const at::Tensor idxs = at::tensor({0, 1, 1, 2}, at::kLong);
    CHECK(ToVector(mk::BatchedNms(boxes, scores, idxs, 0.5)) == std::vector<int64_t>{1, 3, 0});
  }
  SECTION("random boxes and classes agree with the reference") {
    at::manual_seed(4);
    for (int trial = 0; trial < 20; ++trial) {
      const at::Tensor xy = at::rand({500, 2}) * 100;
      const at::Tensor boxes = at::cat({xy, xy + at::rand({500, 2}) * 40 + 1}, 1).round();
      const at::Tensor scores = at::rand({500});
      const at::Tensor idxs = at::randint(0, 7, {500}, at::kLong);
      // 0.625 is exact in float and double, so integer boxes with IoU at the
      // threshold compare the same way in the kernel and the double reference.
      CHECK(ToVector(mk::BatchedNms(boxes, scores, idxs, 0.625)) ==
            ReferenceNms(boxes, scores, idxs, 0.625));
    }
  }
}

TEST_CASE("batched nms keep mask marks exactly batched nms's boxes", "[kernels][nms]") {
  at::manual_seed(5);
  // Both of batched NMS's algorithms (up to 1000 boxes and above), plus no boxes.
  for (int64_t n : {0, 1, 300, 1000, 1001, 3000}) {
    CAPTURE(n);
    const at::Tensor xy = at::rand({n, 2}) * 200;
    const at::Tensor boxes = at::cat({xy, xy + at::rand({n, 2}) * 60 + 1}, 1);
    const at::Tensor scores = at::rand({n});
    const at::Tensor idxs = at::randint(0, 6, {n}, at::kLong);
    const at::Tensor mask = mk::BatchedNmsKeepMask(boxes, scores, idxs, 0.5);
    REQUIRE(mask.scalar_type() == at::kBool);
    REQUIRE(mask.size(0) == n);
    const at::Tensor keep = mk::BatchedNms(boxes, scores, idxs, 0.5);
    CHECK(mask.sum().item<int64_t>() == keep.numel());
    CHECK(at::equal(std::get<0>(keep.sort()), mask.nonzero().squeeze(1)));
  }
}

// The RPN's use (issue 39): levels as groups, the unusable boxes (small or low-scoring) kept
// out; per image, what batched NMS's per-class algorithm keeps with those boxes on a level
// of their own (the model's earlier path), for several images at once.
TEST_CASE("grouped nms keep mask equals batched nms per image and level", "[kernels][nms]") {
  at::manual_seed(17);
  const std::vector<int64_t> sizes{700, 500, 0, 300, 64, 1};
  const int64_t n = 1565, images = 3;
  const at::Tensor xy = at::rand({images, n, 2}) * 300;
  const at::Tensor boxes = at::cat({xy, xy + at::rand({images, n, 2}) * 80 + 1}, 2);
  const at::Tensor scores = at::randint(0, 32, {images, n}).to(at::kFloat) / 32;  // many ties
  const at::Tensor usable = at::rand({images, n}).gt(0.2);
  std::vector<at::Tensor> level_ids;
  for (size_t g = 0; g < sizes.size(); ++g)
    level_ids.push_back(at::full({sizes[g]}, static_cast<int64_t>(g), at::kLong));
  const at::Tensor levels = at::cat(level_ids);
  for (double thr : {0.3, 0.7}) {
    CAPTURE(thr);
    const at::Tensor grouped = mk::NmsKeepMaskGrouped(boxes, scores, usable, sizes, thr);
    REQUIRE(grouped.scalar_type() == at::kBool);
    REQUIRE(grouped.sizes() == scores.sizes());
    CHECK(!grouped.logical_and(usable.logical_not()).any().item<bool>());
    for (int64_t i = 0; i < images; ++i) {
      CAPTURE(i);
      const at::Tensor lvl = at::where(usable[i], levels, static_cast<int64_t>(sizes.size()));
      const at::Tensor want =
          mk::BatchedNmsKeepMask(boxes[i], scores[i], lvl, thr).logical_and(usable[i]);
      CHECK(at::equal(grouped[i], want));
    }
    // And the independent double-precision greedy NMS on one image's usable boxes.
    const at::Tensor rows = usable[1].nonzero().squeeze(1);
    std::vector<int64_t> want =
        ReferenceNms(boxes[1].index_select(0, rows), scores[1].index_select(0, rows),
                     levels.index_select(0, rows), thr);
    for (int64_t& k : want)
      k = rows[k].item<int64_t>();
    std::sort(want.begin(), want.end());
    CHECK(ToVector(grouped[1].nonzero().squeeze(1)) == want);
  }
  // No images, no columns.
  CHECK(mk::NmsKeepMaskGrouped(at::zeros({0, 5, 4}), at::zeros({0, 5}),
                               at::zeros({0, 5}, at::kBool), std::vector<int64_t>{5}, 0.5)
            .numel() == 0);
  CHECK(mk::NmsKeepMaskGrouped(at::zeros({2, 0, 4}), at::zeros({2, 0}),
                               at::zeros({2, 0}, at::kBool), std::vector<int64_t>{0, 0}, 0.5)
            .sizes() == at::IntArrayRef{2, 0});
}

TEST_CASE("grouped nms keep mask names what is wrong with its arguments", "[kernels][nms]") {
  const at::Tensor boxes = at::rand({2, 6, 4}), scores = at::rand({2, 6});
  const at::Tensor usable = at::ones({2, 6}, at::kBool);
  const std::vector<int64_t> ok{4, 2};
  CHECK_THROWS_WITH(mk::NmsKeepMaskGrouped(boxes, scores, usable, std::vector<int64_t>{4, 3}, 0.5),
                    Catch::Contains("add up to 7, not to the 6 boxes"));
  CHECK_THROWS_WITH(mk::NmsKeepMaskGrouped(boxes.view({12, 4}), scores, usable, ok, 0.5),
                    Catch::Contains("boxes must be B×N×4"));
  CHECK_THROWS_WITH(mk::NmsKeepMaskGrouped(boxes, scores, usable.to(at::kByte), ok, 0.5),
                    Catch::Contains("usable must be a B×N bool tensor"));
  CHECK_THROWS_WITH(mk::NmsKeepMaskGrouped(boxes, scores.t(), usable, ok, 0.5),
                    Catch::Contains("scores must be B×N"));
  CHECK_THROWS_WITH(mk::NmsKeepMaskGrouped(boxes, scores, usable, std::vector<int64_t>{7, -1}, 0.5),
                    Catch::Contains("group sizes must be >= 0"));
}

TEST_CASE("roi align edge cases", "[kernels][roi_align]") {
  const at::Tensor input = at::rand({2, 3, 10, 12}, at::kDouble);
  SECTION("no rois") {
    const at::Tensor out = mk::RoiAlign(input, at::empty({0, 5}, at::kDouble), 1.0, 7, 7, 2, true);
    CHECK(out.sizes() == at::IntArrayRef({0, 3, 7, 7}));
  }
  SECTION("rois entirely outside the feature map pool zeros") {
    const at::Tensor rois =
        at::tensor({0., 100., 100., 120., 130., 1., -50., -50., -20., -30.}, at::kDouble)
            .view({2, 5});
    const at::Tensor out = mk::RoiAlign(input, rois, 1.0, 2, 2, 2, false);
    CHECK(out.abs().max().item<double>() == 0.0);
  }
  SECTION("constant features pool to the constant inside the map") {
    const at::Tensor ones = at::ones({1, 2, 8, 8}, at::kDouble);
    const at::Tensor rois = at::tensor({0., 1., 1., 6., 6.}, at::kDouble).view({1, 5});
    const at::Tensor out = mk::RoiAlign(ones, rois, 1.0, 3, 3, 0, true);
    CHECK(at::allclose(out, at::ones_like(out)));
  }
  SECTION("sampling_ratio <= 0 is adaptive (torchvision's default is -1)") {
    const at::Tensor rois =
        at::tensor({0., 1.3, 0.7, 7.2, 5.9, 1., -2., 3., 4.5, 12.}, at::kDouble).view({2, 5});
    for (bool aligned : {false, true}) {
      const at::Tensor adaptive = mk::RoiAlign(input, rois, 0.5, 3, 2, 0, aligned);
      CHECK(at::equal(mk::RoiAlign(input, rois, 0.5, 3, 2, -1, aligned), adaptive));
      CHECK(at::equal(mk::RoiAlign(input, rois, 0.5, 3, 2, -9, aligned), adaptive));
    }
  }
  SECTION("pooled size 0 gives an empty output, negative sizes are rejected") {
    const at::Tensor rois = at::tensor({0., 1., 1., 6., 6.}, at::kDouble).view({1, 5});
    CHECK(mk::RoiAlign(input, rois, 1.0, 0, 4, -1, true).sizes() == at::IntArrayRef({1, 3, 0, 4}));
    CHECK_THROWS_WITH(mk::RoiAlign(input, rois, 1.0, -1, 4, -1, true),
                      Catch::Contains("pooled_height and pooled_width must be >= 0"));
  }
  SECTION("batch index out of range is rejected") {
    const at::Tensor rois = at::tensor({5., 1., 1., 6., 6.}, at::kDouble).view({1, 5});
    CHECK_THROWS_WITH(mk::RoiAlign(input, rois, 1.0, 2, 2, 2, true),
                      Catch::Contains("batch index"));
  }
  SECTION("gradient matches finite differences (double)") {
    at::manual_seed(5);
    const at::Tensor rois =
        at::tensor({0., 1.3, 0.7, 7.2, 5.9, 1., -2., 3., 4.5, 12., 1., 2., 2., 2.5, 2.5},
                   at::kDouble)
            .view({3, 5});
    const at::Tensor weights = at::rand({3, 2, 3, 3}, at::kDouble);
    for (bool aligned : {false, true}) {
      for (int64_t sr : {0, 2}) {
        const at::Tensor x = at::rand({2, 2, 9, 9}, at::kDouble).requires_grad_(true);
        (mk::RoiAlign(x, rois, 1.0, 3, 3, sr, aligned) * weights).sum().backward();
        const at::Tensor analytic = x.grad().clone();
        const at::Tensor base = x.detach().clone();
        at::Tensor numeric = at::zeros_like(base);
        const double eps = 1e-6;
        for (int64_t i = 0; i < base.numel(); ++i) {
          at::Tensor plus = base.clone(), minus = base.clone();
          plus.view({-1})[i] += eps;
          minus.view({-1})[i] -= eps;
          const double fp =
              (mk::RoiAlign(plus, rois, 1.0, 3, 3, sr, aligned) * weights).sum().item<double>();
          const double fm =
              (mk::RoiAlign(minus, rois, 1.0, 3, 3, sr, aligned) * weights).sum().item<double>();
          numeric.view({-1})[i] = (fp - fm) / (2 * eps);
        }
        CHECK(at::allclose(analytic, numeric, 1e-6, 1e-7));
      }
    }
  }
  SECTION("autocast runs in float32 and returns the input dtype") {
    const at::Tensor x = at::rand({1, 4, 16, 16});
    const at::Tensor rois = at::tensor({0.f, 2.f, 3.f, 11.f, 14.f}).view({1, 5});
    const at::Tensor reference = mk::RoiAlign(x, rois, 1.0, 5, 5, 2, true);
    at::Tensor out;
    {
      at::autocast::set_autocast_enabled(at::kCPU, true);
      at::autocast::set_autocast_dtype(at::kCPU, at::kBFloat16);
      out = mk::RoiAlign(x.to(at::kBFloat16), rois.to(at::kBFloat16), 1.0, 5, 5, 2, true);
      at::autocast::set_autocast_enabled(at::kCPU, false);
      at::autocast::clear_cache();
    }
    CHECK(out.scalar_type() == at::kBFloat16);
    CHECK(at::allclose(out.to(at::kFloat), reference, 2e-2, 2e-2));
  }
}

TEST_CASE("multi-level roi align equals roi align on the mapped level", "[kernels][roi_align]") {
  at::manual_seed(6);
  const std::vector<double> scales{0.25, 0.125, 0.0625, 0.03125};
  std::vector<at::Tensor> features;
  for (int64_t l = 0; l < 4; ++l) {
    features.push_back(at::rand({2, 3, 64 >> l, 80 >> l}));
  }
  // Boxes of sides 20..400 cover every level of the canonical rule (224 -> level 4).
  const at::Tensor sizes = at::tensor({20.f, 60.f, 120.f, 224.f, 300.f, 500.f, 112.f, 111.f});
  const at::Tensor x1 = at::rand({8}) * 20;
  const at::Tensor y1 = at::rand({8}) * 20;
  const at::Tensor batch = at::tensor({0.f, 1.f, 0.f, 1.f, 0.f, 1.f, 0.f, 1.f});
  const at::Tensor rois = at::stack({batch, x1, y1, x1 + sizes, y1 + sizes}, 1);
  const at::Tensor out = mk::MultiLevelRoiAlign(features, rois, scales, 7, 7, 2, false);
  REQUIRE(out.sizes() == at::IntArrayRef({8, 3, 7, 7}));
  for (int64_t k = 0; k < 8; ++k) {
    const double side = sizes[k].item<double>();
    const int64_t level =
        std::clamp<int64_t>(static_cast<int64_t>(std::floor(4 + std::log2(side / 224) + 1e-6)), 2,
                            5) -
        2;
    const at::Tensor single =
        mk::RoiAlign(features[level], rois.slice(0, k, k + 1), scales[level], 7, 7, 2, false);
    CHECK(at::allclose(out.slice(0, k, k + 1), single));
  }
  SECTION("gradients reach every level through one backward") {
    std::vector<at::Tensor> leaves;
    for (auto& f : features)
      leaves.push_back(f.clone().requires_grad_(true));
    mk::MultiLevelRoiAlign(leaves, rois, scales, 7, 7, 2, false).sum().backward();
    for (auto& leaf : leaves) {
      REQUIRE(leaf.grad().defined());
      CHECK(leaf.grad().sum().item<double>() > 0);
    }
  }
}

TEST_CASE("multi-level roi align reads channels-last maps bit for bit as planar ones",
          "[kernels][roi_align]") {
  at::manual_seed(7);
  const std::vector<double> scales{0.25, 0.125, 0.0625, 0.03125};
  std::vector<at::Tensor> planar, channels_last;
  for (int64_t l = 0; l < 4; ++l) {
    planar.push_back(at::randn({2, 19, 64 >> l, 80 >> l}));
    channels_last.push_back(planar.back().contiguous(at::MemoryFormat::ChannelsLast));
    REQUIRE_FALSE(channels_last.back().is_contiguous());
  }
  // Boxes on every level, across the map's edges and outside it, and a degenerate one.
  const at::Tensor rois =
      at::tensor({0.f, 3.f,   5.f,   40.f,  30.f,  1.f, -20.f, -10.f, 90.f, 70.f,
                  0.f, 250.f, 200.f, 400.f, 300.f, 1.f, 10.f,  10.f,  10.f, 10.f,
                  0.f, 1.f,   2.f,   300.f, 250.f, 1.f, 70.f,  50.f,  78.f, 64.f})
          .view({6, 5});
  for (const bool aligned : {false, true}) {
    const at::Tensor want = mk::MultiLevelRoiAlign(planar, rois, scales, 7, 7, 2, aligned);
    const at::Tensor got = mk::MultiLevelRoiAlign(channels_last, rois, scales, 7, 7, 2, aligned);
    CHECK(at::equal(got, want));
    const at::Tensor want14 = mk::MultiLevelRoiAlign(planar, rois, scales, 14, 14, 2, aligned);
    CHECK(
        at::equal(mk::MultiLevelRoiAlign(channels_last, rois, scales, 14, 14, 2, aligned), want14));
  }
  // Adaptive sampling (ratio 0) takes the planar kernel on a copy: still the same numbers.
  CHECK(at::equal(mk::MultiLevelRoiAlign(channels_last, rois, scales, 7, 7, 0, false),
                  mk::MultiLevelRoiAlign(planar, rois, scales, 7, 7, 0, false)));
  // Backward: channels-last maps get channels-last gradients (a channels-last network then
  // needs no transform), the same numbers as the planar maps' gradients.
  std::vector<at::Tensor> planar_leaves, channels_last_leaves;
  for (int64_t l = 0; l < 4; ++l) {
    planar_leaves.push_back(planar[l].clone().requires_grad_(true));
    channels_last_leaves.push_back(channels_last[l].clone().requires_grad_(true));
  }
  const at::Tensor upstream = at::randn({6, 19, 7, 7});
  mk::MultiLevelRoiAlign(planar_leaves, rois, scales, 7, 7, 2, true).backward(upstream);
  mk::MultiLevelRoiAlign(channels_last_leaves, rois, scales, 7, 7, 2, true).backward(upstream);
  for (int64_t l = 0; l < 4; ++l) {
    CAPTURE(l);
    CHECK(planar_leaves[l].grad().is_contiguous());
    CHECK(channels_last_leaves[l].grad().is_contiguous(at::MemoryFormat::ChannelsLast));
    CHECK_FALSE(channels_last_leaves[l].grad().is_contiguous());
    CHECK(at::equal(channels_last_leaves[l].grad(), planar_leaves[l].grad()));
  }
}

TEST_CASE("box iou and box coding", "[kernels][box_ops]") {
  const at::Tensor a = Boxes({0, 0, 10, 10, 5, 5, 15, 15});
  const at::Tensor iou = mk::BoxIou(a, a);
  CHECK(iou[0][0].item<float>() == 1.f);
  CHECK(iou[0][1].item<float>() == Approx(25.0 / 175.0));
  CHECK(mk::BoxIou(a, at::empty({0, 4})).sizes() == at::IntArrayRef({2, 0}));
  CHECK(mk::BoxIou(Boxes({0, 0, 1, 1}), Boxes({2, 2, 3, 3})).item<float>() == 0.f);

  at::manual_seed(7);
  const at::Tensor xy = at::rand({50, 2}) * 100;
  const at::Tensor proposals = at::cat({xy, xy + at::rand({50, 2}) * 50 + 1}, 1);
  at::Tensor gt = proposals + at::randn({50, 4});
  gt.slice(1, 2, 4).copy_(at::maximum(gt.slice(1, 2, 4), gt.slice(1, 0, 2) + 0.5));
  const std::array<double, 4> w{10, 10, 5, 5};
  const at::Tensor codes = mk::EncodeBoxes(gt, proposals, w);
  CHECK(at::allclose(mk::DecodeBoxes(codes, proposals, w), gt, 1e-4, 1e-3));
  SECTION("decode clamps the log-scale before exp") {
    const at::Tensor huge = at::tensor({0.f, 0.f, 1000.f, 1000.f}).view({1, 4});
    const at::Tensor box = Boxes({0, 0, 16, 16});
    const at::Tensor out = mk::DecodeBoxes(huge, box, {1, 1, 1, 1});
    CHECK(out[0][2].item<float>() - out[0][0].item<float>() == Approx(1000.0).epsilon(1e-5));
  }
}

TEST_CASE("anchors", "[kernels][anchors]") {
  const at::Tensor anchors =
      mk::GenerateAnchors({{2, 3}, {1, 1}}, {{4, 4}, {8, 8}}, {{32.0}, {64.0, 128.0}},
                          {{0.5, 1.0, 2.0}, {1.0}}, at::Device(at::kCPU));
  REQUIRE(anchors.sizes() == at::IntArrayRef({2 * 3 * 3 + 2, 4}));
  // Location (0,0), ratio 1, size 32 is the second anchor of the first location.
  CHECK(at::equal(anchors[1], at::tensor({-16.f, -16.f, 16.f, 16.f})));
  // Location (row 1, col 2) shifts by (8, 4).
  CHECK(at::equal(anchors[5 * 3 + 1], at::tensor({-8.f, -12.f, 24.f, 20.f})));
  CHECK(at::equal(anchors[19], at::tensor({-64.f, -64.f, 64.f, 64.f})));
}

TEST_CASE("matcher", "[kernels][matching]") {
  // 2 gt × 4 predictions.
  const at::Tensor q = at::tensor({0.9f, 0.5f, 0.2f, 0.1f, 0.3f, 0.6f, 0.35f, 0.05f}).view({2, 4});
  CHECK(ToVector(mk::MatchProposals(q, 0.7, 0.3, false)) == std::vector<int64_t>{0, -2, -2, -1});
  // gt 1's best prediction (index 1, 0.6) is restored; gt 0's is already matched.
  CHECK(ToVector(mk::MatchProposals(q, 0.7, 0.3, true)) == std::vector<int64_t>{0, 1, -2, -1});
  CHECK_THROWS_WITH(mk::MatchProposals(at::empty({0, 4}), 0.7, 0.3, true),
                    Catch::Contains("no ground-truth"));
}

TEST_CASE("balanced sampler", "[kernels][sampling]") {
  at::manual_seed(8);
  const at::Tensor labels = at::cat({at::ones({30}), at::zeros({500}), at::full({20}, -1.f)});
  const auto [pos, neg] = mk::SampleBalanced(labels, 256, 0.25);
  CHECK(pos.sum().item<int64_t>() == 30);
  CHECK(neg.sum().item<int64_t>() == 226);
  CHECK((pos & (labels != 1)).sum().item<int64_t>() == 0);
  CHECK((neg & (labels != 0)).sum().item<int64_t>() == 0);
  const auto [pos2, neg2] =
      mk::SampleBalanced(at::cat({at::ones({300}), at::zeros({10})}), 256, 0.5);
  CHECK(pos2.sum().item<int64_t>() == 128);
  CHECK(neg2.sum().item<int64_t>() == 10);
  const auto [pos3, neg3] = mk::SampleBalanced(at::empty({0}), 256, 0.5);
  CHECK(pos3.numel() == 0);
}

TEST_CASE("mask paste", "[kernels][mask_paste]") {
  const at::Tensor masks = at::ones({2, 1, 28, 28});
  // Box 0 well inside a 100×100 image; box 1 entirely outside it.
  const at::Tensor boxes = Boxes({20, 30, 60, 70, 200, 200, 260, 260});
  const at::Tensor out = mk::PasteMasks(masks, boxes, 100, 100);
  REQUIRE(out.sizes() == at::IntArrayRef({2, 1, 100, 100}));
  CHECK(out[1].abs().sum().item<float>() == 0.f);
  CHECK(out[0][0][50][40].item<float>() == Approx(1.0));
  CHECK(out[0][0][5][5].item<float>() == 0.f);
  CHECK(mk::PasteMasks(at::empty({0, 1, 28, 28}), at::empty({0, 4}), 10, 10).sizes() ==
        at::IntArrayRef({0, 1, 10, 10}));
}

TEST_CASE("mask paste binary equals paste then threshold", "[kernels][mask_paste]") {
  at::manual_seed(5);
  const at::Tensor masks = at::rand({12, 1, 28, 28});
  // Boxes inside, across the border and outside a 90×130 image, one degenerate.
  const at::Tensor boxes =
      Boxes({10, 10, 60,  50, -20, -5, 40, 30, 100, 60, 200, 140, 30, 30, 30,  30,
             0,  0,  130, 90, 5,   70, 8,  89, 50,  1,  51,  2,   -9, -9, -1,  -1,
             64, 44, 66,  46, 0,   0,  1,  1,  120, 80, 129, 89,  2,  3,  127, 88});
  for (double threshold : {0.5, 0.25, 0.0}) {
    const at::Tensor binary = mk::PasteMasksBinary(masks, boxes, 90, 130, 1, threshold);
    REQUIRE(binary.scalar_type() == at::kByte);
    const at::Tensor expected =
        mk::PasteMasks(masks, boxes, 90, 130, 1).ge(threshold).to(at::kByte);
    CHECK(at::equal(binary, expected));
  }
  CHECK(
      mk::PasteMasksBinary(at::empty({0, 1, 28, 28}), at::empty({0, 4}), 10, 10, 1, 0.5).sizes() ==
      at::IntArrayRef({0, 1, 10, 10}));
  CHECK_THROWS_WITH(mk::PasteMasksBinary(masks, boxes.narrow(0, 0, 3), 10, 10, 1, 0.5),
                    Catch::Contains("one box per mask"));
}

TEST_CASE("winograd 3x3 convolution equals direct convolution", "[kernels][conv_winograd]") {
  at::manual_seed(11);
  struct Case {
    int64_t n, c, k, h, w;
  };
  // Sizes that are and are not multiples of the tile, single rows and columns, more
  // images than fit one chunk, many small images laid out as grids on canvases (with
  // empty grid cells: 40 and 7 images), and channel counts that are not multiples of 8.
  for (const Case& cs :
       {Case{1, 3, 5, 1, 1}, Case{2, 7, 9, 5, 3}, Case{1, 16, 8, 17, 31}, Case{40, 24, 12, 14, 14},
        Case{1, 8, 8, 130, 9}, Case{3, 5, 6, 4, 8}, Case{7, 6, 5, 3, 2}, Case{300, 4, 3, 6, 5}}) {
    const at::Tensor x = at::randn({cs.n, cs.c, cs.h, cs.w});
    const at::Tensor w = at::randn({cs.k, cs.c, 3, 3}) * 0.2;
    const at::Tensor b = at::randn({cs.k});
    const at::Tensor reference =
        at::conv2d(x.to(at::kDouble), w.to(at::kDouble), b.to(at::kDouble), 1, 1);
    const double scale = reference.abs().max().item<double>();
    for (int64_t tile : {2, 4, 6}) {
      const at::Tensor u = mk::WinogradConv3x3Weight(w, tile);
      CHECK(u.sizes() == at::IntArrayRef({(tile + 2) * (tile + 2), cs.k, cs.c}));
      const at::Tensor y = mk::WinogradConv3x3(x, u, b, false, tile);
      REQUIRE(y.sizes() == reference.sizes());
      const double tolerance = tile == 2 ? 2e-6 : 3e-5;
      CAPTURE(cs.n, cs.c, cs.k, cs.h, cs.w, tile);
      CHECK((y.to(at::kDouble) - reference).abs().max().item<double>() <= tolerance * scale);
      const at::Tensor relu = mk::WinogradConv3x3(x, u, b, true, tile);
      CHECK(at::equal(relu, y.clamp_min(0)));
      const at::Tensor no_bias = mk::WinogradConv3x3(x, u, std::nullopt, false, tile);
      CHECK((no_bias + b.view({1, -1, 1, 1}) - y).abs().max().item<float>() <= 1e-5 * scale);
    }
  }
  const at::Tensor x = at::randn({2, 4, 6, 6});
  const at::Tensor u = mk::WinogradConv3x3Weight(at::randn({3, 4, 3, 3}), 4);
  CHECK(mk::WinogradConv3x3(at::empty({0, 4, 6, 6}), u, std::nullopt, false, 4).sizes() ==
        at::IntArrayRef({0, 3, 6, 6}));
  CHECK_THROWS_WITH(mk::WinogradConv3x3(x, u, std::nullopt, false, 2),
                    Catch::Contains("conv3x3_winograd_weight(weight, 2)"));
  CHECK_THROWS_WITH(mk::WinogradConv3x3(x, u, std::nullopt, false, 3),
                    Catch::Contains("tile must be"));
  CHECK_THROWS_WITH(mk::WinogradConv3x3(x.to(at::kDouble), u, std::nullopt, false, 4),
                    Catch::Contains("float32"));
  CHECK_THROWS_WITH(mk::WinogradConv3x3Weight(at::randn({3, 4, 5, 5}), 4),
                    Catch::Contains("K×C×3×3"));
  CHECK_THROWS_WITH(mk::WinogradConv3x3(x, u, at::zeros({7}), false, 4),
                    Catch::Contains("bias must have 3"));
}

namespace {

// Masks that exercise every edge of the change-point walk: empty, full, first and last
// pixel set, single rows and columns, boxes of random blobs, and a checkerboard (a change at
// every pixel).
std::vector<at::Tensor> RleCases() {
  at::manual_seed(40);
  std::vector<at::Tensor> cases;
  cases.push_back(at::zeros({3, 1, 7, 5}, at::kByte));
  cases.push_back(at::ones({2, 1, 4, 9}, at::kByte));
  at::Tensor corners = at::zeros({2, 1, 6, 4}, at::kByte);
  corners[0][0][0][0] = 1;
  corners[1][0][5][3] = 1;
  cases.push_back(corners);
  cases.push_back((at::rand({4, 1, 1, 37}) > 0.5).to(at::kByte));
  cases.push_back((at::rand({4, 1, 29, 1}) > 0.5).to(at::kByte));
  at::Tensor blobs = at::zeros({6, 1, 61, 83}, at::kByte);
  for (int64_t i = 0; i < 6; ++i) {
    const int64_t y = 3 * i, x = 5 * i;
    blobs[i][0]
        .slice(0, y, y + 20 + i)
        .slice(1, x, x + 30 + 2 * i)
        .copy_((at::rand({20 + i, 30 + 2 * i}) > 0.3).to(at::kByte));
  }
  cases.push_back(blobs);
  cases.push_back(((at::arange(17).view({17, 1}) + at::arange(13).view({1, 13})) % 2)
                      .to(at::kByte)
                      .view({1, 1, 17, 13}));
  cases.push_back(at::rand({5, 33, 47}) > 0.5);  // bool, N×H×W
  // Any nonzero byte is foreground, as in EncodeMask.
  cases.push_back(at::randint(0, 4, {3, 1, 19, 23}, at::kByte));
  cases.push_back(at::zeros({0, 1, 8, 8}, at::kByte));
  cases.push_back(at::zeros({2, 1, 0, 8}, at::kByte));
  return cases;
}

}  // namespace

TEST_CASE("mask rle changes give EncodeMask's runs", "[kernels][mask_rle]") {
  for (const at::Tensor& masks : RleCases()) {
    CAPTURE(masks.sizes(), masks.scalar_type());
    const auto [changes, offsets] = mk::MaskRleChanges(masks);
    REQUIRE(changes.scalar_type() == at::kInt);
    REQUIRE(offsets.scalar_type() == at::kLong);
    const int64_t n = masks.size(0), h = masks.size(-2), w = masks.size(-1);
    REQUIRE(offsets.numel() == n + 1);
    const int64_t* po = offsets.data_ptr<int64_t>();
    CHECK(po[0] == 0);
    CHECK(po[n] == changes.numel());
    const at::Tensor bytes = masks.reshape({n, h, w}).to(at::kByte).contiguous();
    for (int64_t i = 0; i < n; ++i) {
      CAPTURE(i);
      const mrcnn::data::Rle expected = mrcnn::data::EncodeMask(bytes[i].data_ptr<uint8_t>(), h, w);
      const mrcnn::data::Rle got =
          mrcnn::data::RleFromChanges(changes.data_ptr<int32_t>() + po[i], po[i + 1] - po[i], h, w);
      CHECK(got == expected);
    }
  }
}

TEST_CASE("mask rle changes refuse what is not a stack of binary masks", "[kernels][mask_rle]") {
  CHECK_THROWS_WITH(mk::MaskRleChanges(at::zeros({2, 3, 4, 4}, at::kByte)),
                    Catch::Contains("masks must be N×1×H×W or N×H×W"));
  CHECK_THROWS_WITH(mk::MaskRleChanges(at::zeros({2, 4, 4})),
                    Catch::Contains("masks must be uint8 or bool"));
  CHECK_THROWS_WITH(mk::MaskRleChanges(at::zeros({4, 4}, at::kByte)),
                    Catch::Contains("masks must be N×1×H×W or N×H×W"));
}

TEST_CASE("RleFromChanges refuses changes out of order or outside the mask",
          "[kernels][mask_rle]") {
  const std::vector<int32_t> unordered{3, 2}, repeated{0, 0}, outside{5, 12};
  CHECK_THROWS_WITH(mrcnn::data::RleFromChanges(unordered.data(), 2, 3, 4),
                    Catch::Contains("change 1 is at 2, after 3"));
  CHECK_THROWS_WITH(mrcnn::data::RleFromChanges(repeated.data(), 2, 3, 4),
                    Catch::Contains("change 1 is at 0"));
  CHECK_THROWS_WITH(mrcnn::data::RleFromChanges(outside.data(), 2, 3, 4),
                    Catch::Contains("must increase and lie within it"));
  const mrcnn::data::Rle full = mrcnn::data::RleFromChanges(repeated.data(), 1, 3, 4);
  CHECK(full.counts == std::vector<uint32_t>{0, 12});
}

TEST_CASE("deform conv names the argument whose shape is wrong", "[kernels][deform_conv]") {
  const at::Tensor x = at::randn({2, 4, 6, 6});
  const at::Tensor w = at::randn({3, 4, 3, 3});
  // 3×3 kernel, padding 0: a 4×4 output grid and 2·1·9 = 18 offset channels.
  CHECK_THROWS_WITH(mk::DeformConv2d(x, at::zeros({2, 17, 4, 4}), std::nullopt, w, std::nullopt),
                    Catch::Contains("offset must be B×(2·offset_groups·kh·kw)×out_h×out_w = "
                                    "2×18×4×4, got shape [2, 17, 4, 4]"));
  CHECK_THROWS_WITH(mk::DeformConv2d(x, at::zeros({2, 18, 6, 6}), std::nullopt, w, std::nullopt),
                    Catch::Contains("offset must be"));
  CHECK_THROWS_WITH(
      mk::DeformConv2d(x, at::zeros({2, 18, 4, 4}), at::ones({2, 18, 4, 4}), w, std::nullopt),
      Catch::Contains("mask must be B×(offset_groups·kh·kw)×out_h×out_w = 2×9×4×4"));
  CHECK_THROWS_WITH(mk::DeformConv2d(x, at::zeros({2, 54, 4, 4}), std::nullopt, w, std::nullopt,
                                     {1, 1}, {0, 0}, {1, 1}, 1, 3),
                    Catch::Contains("must be divisible by offset_groups (3)"));
  CHECK_THROWS_WITH(mk::DeformConv2d(x, at::zeros({2, 18, 4, 4}), std::nullopt, w, std::nullopt,
                                     {1, 1}, {0, 0}, {1, 1}, 2, 1),
                    Catch::Contains("weight's output channels (3) must be divisible by groups"));
  CHECK_THROWS_WITH(mk::DeformConv2d(x, at::zeros({2, 18, 4, 4}), std::nullopt, w, at::zeros({4})),
                    Catch::Contains("bias must be C_out (3)"));
  CHECK_THROWS_WITH(
      mk::DeformConv2d(x, at::zeros({2, 18, 4, 4}), std::nullopt, w, std::nullopt, {0, 1}),
      Catch::Contains("stride must be >= 1"));
  CHECK_THROWS_WITH(mk::DeformConv2d(x.to(at::kHalf), at::zeros({2, 18, 4, 4}, at::kHalf),
                                     std::nullopt, w.to(at::kHalf), std::nullopt),
                    Catch::Contains("input must be float32 or float64"));
}

TEST_CASE("deform conv with zero offsets is a convolution, gradients included",
          "[kernels][deform_conv]") {
  at::manual_seed(21);
  const at::Tensor x = at::randn({3, 4, 9, 7}, at::kDouble).requires_grad_(true);
  const at::Tensor w = at::randn({6, 2, 3, 2}, at::kDouble).requires_grad_(true);
  const at::Tensor b = at::randn({6}, at::kDouble).requires_grad_(true);
  // stride 2, padding 1, dilation 2, groups 2, offset_groups 2: a 4×4 grid, 2·2·6 channels.
  const at::Tensor off = at::zeros({3, 24, 4, 4}, at::kDouble).requires_grad_(true);
  const at::Tensor mask = at::ones({3, 12, 4, 4}, at::kDouble).requires_grad_(true);
  const at::Tensor ours = mk::DeformConv2d(x, off, mask, w, b, {2, 2}, {1, 1}, {2, 2}, 2, 2);
  const at::Tensor grad = at::randn(ours.sizes(), at::kDouble);
  ours.backward(grad);
  const at::Tensor x2 = x.detach().clone().requires_grad_(true);
  const at::Tensor w2 = w.detach().clone().requires_grad_(true);
  const at::Tensor b2 = b.detach().clone().requires_grad_(true);
  const at::Tensor conv = at::conv2d(x2, w2, b2, {2, 2}, {1, 1}, {2, 2}, 2);
  conv.backward(grad);
  CHECK(at::allclose(ours, conv, 1e-12, 1e-12));
  CHECK(at::allclose(x.grad(), x2.grad(), 1e-12, 1e-12));
  CHECK(at::allclose(w.grad(), w2.grad(), 1e-12, 1e-12));
  CHECK(at::allclose(b.grad(), b2.grad(), 1e-12, 1e-12));
  CHECK(off.grad().defined());
  CHECK(mask.grad().defined());
  // v1 without bias: no mask, no bias gradient, same output as the all-ones mask.
  const at::Tensor v1 =
      mk::DeformConv2d(x, off, std::nullopt, w, std::nullopt, {2, 2}, {1, 1}, {2, 2}, 2, 2);
  CHECK(at::allclose(v1, conv - b.view({1, -1, 1, 1}), 1e-12, 1e-12));
}
