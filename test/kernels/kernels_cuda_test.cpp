// Every CUDA kernel against its CPU twin on the same random inputs. Exits 77
// (CTest "Skipped") when no CUDA device is present: never a silent pass.
#define CATCH_CONFIG_RUNNER
#include <ATen/ATen.h>
#include <ATen/Context.h>

#include <array>
#include <catch2/catch.hpp>
#include <cstdio>
#include <limits>
#include <utility>
#include <vector>

#include "kernels/ops.h"

namespace mk = mrcnn::kernels;

namespace {

const at::Device kCuda(at::kCUDA, 0);

at::Tensor RandomBoxes(int64_t n, double extent, double max_side) {
  const at::Tensor xy = at::rand({n, 2}) * extent;
  return at::cat({xy, xy + at::rand({n, 2}) * max_side + 0.5}, 1);
}

bool SameIndices(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && at::equal(a.cpu(), b.cpu());
}

// Batched NMS above torchvision's per-class threshold orders its survivors by an unstable
// sort of their scores, as torchvision does on each device: the CPU and CUDA orders may
// differ among equal scores only. Same kept boxes, and the same score at every position.
bool SameKeepUpToScoreTies(const at::Tensor& a, const at::Tensor& b, const at::Tensor& scores) {
  const at::Tensor ac = a.cpu(), bc = b.cpu();
  return ac.sizes() == bc.sizes() &&
         at::equal(std::get<0>(ac.sort(0, false)), std::get<0>(bc.sort(0, false))) &&
         at::equal(scores.index_select(0, ac), scores.index_select(0, bc));
}

}  // namespace

int main(int argc, char* argv[]) {
  if (!at::globalContext().hasCUDA()) {
    std::fprintf(stderr, "kernels_cuda_test: SKIPPED, no CUDA device on this machine\n");
    return 77;
  }
  return Catch::Session().run(argc, argv);
}

TEST_CASE("nms cuda equals cpu", "[cuda]") {
  at::manual_seed(11);
  for (int64_t n : {0, 1, 63, 64, 65, 1000, 5000, 20000}) {
    const at::Tensor boxes = RandomBoxes(n, 1000, 200);
    const at::Tensor scores = at::rand({n});
    for (double thr : {0.3, 0.5, 0.7}) {
      CHECK(SameIndices(mk::Nms(boxes.to(kCuda), scores.to(kCuda), thr),
                        mk::Nms(boxes, scores, thr)));
    }
  }
  // Ties and duplicates.
  const at::Tensor dup = at::tensor({0.f, 0.f, 10.f, 10.f}).view({1, 4}).repeat({300, 1});
  const at::Tensor tied = at::full({300}, 0.5f);
  CHECK(SameIndices(mk::Nms(dup.to(kCuda), tied.to(kCuda), 0.5), mk::Nms(dup, tied, 0.5)));
}

TEST_CASE("batched nms cuda equals cpu", "[cuda]") {
  at::manual_seed(12);
  for (int64_t n : {0, 1, 100, 4000, 20000}) {
    CAPTURE(n);
    const at::Tensor boxes = RandomBoxes(n, 800, 150);
    // Scores with many ties (multiples of 1/64): the order among equal scores is each
    // device's sort's.
    const at::Tensor scores = at::randint(0, 64, {n}).to(at::kFloat) / 64;
    const at::Tensor idxs = at::randint(0, 80, {n}, at::kLong);
    const at::Tensor cpu = mk::BatchedNms(boxes, scores, idxs, 0.5);
    const at::Tensor gpu = mk::BatchedNms(boxes.to(kCuda), scores.to(kCuda), idxs.to(kCuda), 0.5);
    CHECK(SameKeepUpToScoreTies(gpu, cpu, scores));
    if (n <= 1000) {  // the coordinate trick path keeps a stable score order on both
      CHECK(SameIndices(gpu, cpu));
    }
  }
  // Both torchvision algorithms (<= 1000 boxes: coordinate trick; above: per class) on
  // the inputs where they differ from plain per-class NMS.
  for (int64_t n : {300, 1500}) {
    CAPTURE(n);
    const at::Tensor boxes = RandomBoxes(n, 300, 60) - 100;  // negative coordinates
    const at::Tensor scores = at::rand({n});
    at::Tensor idxs = at::randint(0, 5, {n}, at::kLong).to(at::kDouble) / 3;  // fractional
    idxs.slice(0, 0, n, 7).fill_(std::numeric_limits<double>::quiet_NaN());
    for (double thr : {-0.5, 0.0, 0.5}) {
      CAPTURE(thr);
      CHECK(SameKeepUpToScoreTies(
          mk::BatchedNms(boxes.to(kCuda), scores.to(kCuda), idxs.to(kCuda), thr),
          mk::BatchedNms(boxes, scores, idxs, thr), scores));
    }
  }
}

TEST_CASE("batched nms keep mask cuda equals cpu", "[cuda]") {
  at::manual_seed(16);
  for (int64_t n : {0, 1, 100, 1000, 1001, 4000, 20000}) {
    CAPTURE(n);
    const at::Tensor boxes = RandomBoxes(n, 800, 150);
    const at::Tensor scores = at::randint(0, 64, {n}).to(at::kFloat) / 64;  // many ties
    const at::Tensor idxs = at::randint(0, 6, {n}, at::kLong);
    const at::Tensor cpu = mk::BatchedNmsKeepMask(boxes, scores, idxs, 0.7);
    const at::Tensor gpu =
        mk::BatchedNmsKeepMask(boxes.to(kCuda), scores.to(kCuda), idxs.to(kCuda), 0.7);
    CHECK(gpu.is_cuda());
    CHECK(at::equal(gpu.cpu(), cpu));
  }
}

TEST_CASE("grouped nms keep mask cuda equals cpu", "[cuda]") {
  at::manual_seed(18);
  // The RPN's shape at 800×1333 (five levels, the last one short), a batch of 8, many ties;
  // then odd sizes: empty groups, a single box, a group past one 64-box word row.
  for (const auto& sizes : {std::vector<int64_t>{2000, 2000, 2000, 2000, 819},
                            std::vector<int64_t>{0, 1, 63, 64, 65, 0, 130}}) {
    int64_t n = 0;
    for (int64_t size : sizes)
      n += size;
    const int64_t images = 8;
    const at::Tensor xy = at::rand({images, n, 2}) * 1000;
    const at::Tensor boxes = at::cat({xy, xy + at::rand({images, n, 2}) * 200 + 0.5}, 2);
    const at::Tensor scores = at::randint(0, 64, {images, n}).to(at::kFloat) / 64;
    const at::Tensor usable = at::rand({images, n}).gt(0.1);
    for (double thr : {0.5, 0.7}) {
      CAPTURE(n, thr);
      const at::Tensor cpu = mk::NmsKeepMaskGrouped(boxes, scores, usable, sizes, thr);
      const at::Tensor gpu =
          mk::NmsKeepMaskGrouped(boxes.to(kCuda), scores.to(kCuda), usable.to(kCuda), sizes, thr);
      CHECK(gpu.is_cuda());
      CHECK(at::equal(gpu.cpu(), cpu));
    }
  }
}

TEST_CASE("roi align cuda equals cpu, forward and backward", "[cuda]") {
  at::manual_seed(13);
  const at::Tensor x = at::rand({2, 16, 50, 60});
  const at::Tensor boxes = RandomBoxes(200, 70, 40) - 5;  // some rois leave the map
  const at::Tensor rois = at::cat({at::randint(0, 2, {200, 1}).to(at::kFloat), boxes}, 1);
  const at::Tensor w = at::rand({200, 16, 7, 7});
  for (bool aligned : {false, true}) {
    for (int64_t sr : {-1, 0, 1, 2, 4}) {
      const at::Tensor xc = x.clone().requires_grad_(true);
      const at::Tensor xg = x.to(kCuda).requires_grad_(true);
      const at::Tensor yc = mk::RoiAlign(xc, rois, 0.5, 7, 7, sr, aligned);
      const at::Tensor yg = mk::RoiAlign(xg, rois.to(kCuda), 0.5, 7, 7, sr, aligned);
      CHECK(at::allclose(yg.cpu(), yc, 1e-5, 1e-5));
      (yc * w).sum().backward();
      (yg * w.to(kCuda)).sum().backward();
      CHECK(at::allclose(xg.grad().cpu(), xc.grad(), 1e-4, 1e-4));
    }
  }
  SECTION("degenerate rois and sizes pool as on the CPU") {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const double inf = std::numeric_limits<double>::infinity();
    const at::Tensor odd = at::tensor({0., 1., nan, 9., 9., 1., 2., 3., inf,  8.,
                                       0., 9., 2.,  1., 1., 1., 3., 3., 1e30, 9.},
                                      at::kFloat)
                               .view({4, 5});
    // Not aligned, a NaN roi size stays NaN on both (CUDA's max(NaN, 1) would give 1).
    for (bool aligned : {true, false}) {
      for (int64_t sr : {-1, 2}) {
        for (double scale : {0.5, 0.0, -1.0}) {
          const at::Tensor yc = mk::RoiAlign(x, odd, scale, 7, 7, sr, aligned);
          const at::Tensor yg = mk::RoiAlign(x.to(kCuda), odd.to(kCuda), scale, 7, 7, sr, aligned);
          CHECK(at::allclose(yg.cpu(), yc, 1e-5, 1e-5, /*equal_nan=*/true));
        }
      }
    }
    CHECK(mk::RoiAlign(x.to(kCuda), rois.to(kCuda), 0.5, 0, 7, -1, false).numel() == 0);
  }
  SECTION("half precision accumulates in float") {
    const at::Tensor yh =
        mk::RoiAlign(x.to(kCuda).to(at::kHalf), rois.to(kCuda).to(at::kHalf), 0.5, 7, 7, 2, true);
    CHECK(yh.scalar_type() == at::kHalf);
  }
}

TEST_CASE("multi-level roi align cuda equals cpu", "[cuda]") {
  at::manual_seed(14);
  const std::vector<double> scales{0.25, 0.125, 0.0625, 0.03125};
  std::vector<at::Tensor> feats_cpu, feats_gpu;
  for (int64_t l = 0; l < 4; ++l) {
    feats_cpu.push_back(at::rand({2, 8, 200 >> l, 336 >> l}).requires_grad_(true));
    feats_gpu.push_back(feats_cpu.back().detach().to(kCuda).requires_grad_(true));
  }
  const at::Tensor boxes = RandomBoxes(300, 1000, 500);
  const at::Tensor rois = at::cat({at::randint(0, 2, {300, 1}).to(at::kFloat), boxes}, 1);
  const at::Tensor yc = mk::MultiLevelRoiAlign(feats_cpu, rois, scales, 7, 7, 2, false);
  const at::Tensor yg = mk::MultiLevelRoiAlign(feats_gpu, rois.to(kCuda), scales, 7, 7, 2, false);
  CHECK(at::allclose(yg.cpu(), yc, 1e-5, 1e-5));
  yc.sum().backward();
  yg.sum().backward();
  for (int l = 0; l < 4; ++l) {
    CHECK(at::allclose(feats_gpu[l].grad().cpu(), feats_cpu[l].grad(), 1e-4, 1e-4));
  }
}

// Issue 39: FPN maps in channels-last memory are pooled in place (channel fastest), the
// pooled output and the maps' gradients channels-last too; the numbers are the planar CPU
// kernel's, forward and backward.
TEST_CASE("multi-level roi align on channels-last maps cuda equals cpu", "[cuda]") {
  at::manual_seed(19);
  const std::vector<double> scales{0.25, 0.125, 0.0625, 0.03125};
  const at::Tensor boxes = RandomBoxes(300, 1000, 500);
  const at::Tensor rois = at::cat({at::randint(0, 2, {300, 1}).to(at::kFloat), boxes}, 1);
  for (const int64_t size : {7, 14}) {
    CAPTURE(size);
    std::vector<at::Tensor> feats_cpu, feats_gpu;
    for (int64_t l = 0; l < 4; ++l) {
      const at::Tensor map = at::rand({2, 24, 200 >> l, 336 >> l});
      feats_cpu.push_back(map.clone().requires_grad_(true));
      feats_gpu.push_back(
          map.to(kCuda).contiguous(at::MemoryFormat::ChannelsLast).requires_grad_(true));
    }
    const at::Tensor yc = mk::MultiLevelRoiAlign(feats_cpu, rois, scales, size, size, 2, true);
    const at::Tensor yg =
        mk::MultiLevelRoiAlign(feats_gpu, rois.to(kCuda), scales, size, size, 2, true);
    CHECK(yg.is_contiguous(at::MemoryFormat::ChannelsLast));
    CHECK(at::allclose(yg.cpu(), yc, 1e-5, 1e-5));
    const at::Tensor upstream = at::rand(yc.sizes());
    yc.backward(upstream);
    yg.backward(upstream.to(kCuda));
    for (int l = 0; l < 4; ++l) {
      CAPTURE(l);
      CHECK(feats_gpu[l].grad().is_contiguous(at::MemoryFormat::ChannelsLast));
      CHECK(at::allclose(feats_gpu[l].grad().cpu(), feats_cpu[l].grad(), 1e-4, 1e-4));
    }
  }
}

TEST_CASE("box ops cuda equal cpu", "[cuda]") {
  at::manual_seed(15);
  const at::Tensor a = RandomBoxes(700, 500, 100), b = RandomBoxes(90, 500, 100);
  CHECK(at::allclose(mk::BoxIou(a.to(kCuda), b.to(kCuda)).cpu(), mk::BoxIou(a, b), 0, 0));
  const std::array<double, 4> w{10, 10, 5, 5};
  // Some noisy boxes get a negative width or height: log gives NaN there, on both devices.
  const at::Tensor gt = a + at::randn({700, 4});
  CHECK(at::allclose(mk::EncodeBoxes(gt.to(kCuda), a.to(kCuda), w).cpu(), mk::EncodeBoxes(gt, a, w),
                     1e-5, 1e-6, /*equal_nan=*/true));
  const at::Tensor codes = at::randn({700, 8});
  CHECK(at::allclose(mk::DecodeBoxes(codes.to(kCuda), a.to(kCuda), w).cpu(),
                     mk::DecodeBoxes(codes, a, w), 1e-5, 1e-4));
  SECTION("NaN inputs propagate as on the CPU (CUDA's min/max would drop them)") {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    at::Tensor a_nan = a.clone(), codes_nan = codes.clone();
    a_nan.index_put_({at::indexing::Slice(0, 700, 7), 2}, nan);
    codes_nan.index_put_({at::indexing::Slice(0, 700, 5), 2}, nan);
    codes_nan.index_put_({at::indexing::Slice(1, 700, 5), 7}, nan);
    CHECK(at::allclose(mk::BoxIou(a_nan.to(kCuda), b.to(kCuda)).cpu(), mk::BoxIou(a_nan, b), 0, 0,
                       /*equal_nan=*/true));
    CHECK(at::allclose(mk::DecodeBoxes(codes_nan.to(kCuda), a.to(kCuda), w).cpu(),
                       mk::DecodeBoxes(codes_nan, a, w), 1e-5, 1e-4, /*equal_nan=*/true));
  }
}

TEST_CASE("anchors cuda equal cpu", "[cuda]") {
  const std::vector<std::array<int64_t, 2>> sizes{
      {200, 336}, {100, 168}, {50, 84}, {25, 42}, {13, 21}};
  const std::vector<std::array<int64_t, 2>> strides{{4, 4}, {8, 8}, {16, 16}, {32, 32}, {64, 64}};
  const std::vector<std::vector<double>> s{{32}, {64}, {128}, {256}, {512}};
  const std::vector<std::vector<double>> r(5, {0.5, 1.0, 2.0});
  CHECK(at::equal(mk::GenerateAnchors(sizes, strides, s, r, kCuda).cpu(),
                  mk::GenerateAnchors(sizes, strides, s, r, at::Device(at::kCPU))));
}

TEST_CASE("matcher cuda equals cpu", "[cuda]") {
  at::manual_seed(16);
  const at::Tensor gt = RandomBoxes(20, 800, 300), props = RandomBoxes(4000, 800, 300);
  const at::Tensor q = mk::BoxIou(gt, props);
  for (bool low : {false, true}) {
    CHECK(SameIndices(mk::MatchProposals(q.to(kCuda), 0.7, 0.3, low),
                      mk::MatchProposals(q, 0.7, 0.3, low)));
  }
}

TEST_CASE("sampler on cuda respects the quotas", "[cuda]") {
  const at::Tensor labels =
      at::cat({at::ones({40}), at::zeros({900}), at::full({60}, -1.f)}).to(kCuda);
  const auto [pos, neg] = mk::SampleBalanced(labels, 512, 0.25);
  CHECK(pos.sum().item<int64_t>() == 40);
  CHECK(neg.sum().item<int64_t>() == 472);
  CHECK((neg & (labels != 0)).sum().item<int64_t>() == 0);
}

TEST_CASE("mask paste cuda equals cpu", "[cuda]") {
  at::manual_seed(17);
  const at::Tensor masks = at::rand({30, 1, 28, 28});
  const at::Tensor boxes = RandomBoxes(30, 500, 300) - 50;
  CHECK(at::allclose(mk::PasteMasks(masks.to(kCuda), boxes.to(kCuda), 480, 640).cpu(),
                     mk::PasteMasks(masks, boxes, 480, 640), 1e-6, 1e-6));
  // Thresholded: equal except where a value sits within rounding of the threshold.
  const at::Tensor gpu =
      mk::PasteMasksBinary(masks.to(kCuda), boxes.to(kCuda), 480, 640, 1, 0.5).cpu();
  const at::Tensor cpu = mk::PasteMasksBinary(masks, boxes, 480, 640, 1, 0.5);
  REQUIRE(gpu.scalar_type() == at::kByte);
  const at::Tensor near = (mk::PasteMasks(masks, boxes, 480, 640) - 0.5).abs() <= 1e-6;
  CHECK(at::equal(gpu.masked_fill(near, 0), cpu.masked_fill(near, 0)));
}

TEST_CASE("mask paste cuda equals cpu on thin and border boxes", "[cuda]") {
  // Issue 25's shapes: boxes 0.4-13 px across and up to the whole image long, touching
  // every border, on a tall (1200x300) and a wide (333x517) image.
  at::manual_seed(25);
  for (const auto& [h, w] : {std::pair<int64_t, int64_t>{1200, 300}, {333, 517}}) {
    std::vector<float> coords;
    for (const float thin : {0.4f, 1.0f, 2.0f, 3.0f, 13.0f}) {
      const float fh = static_cast<float>(h), fw = static_cast<float>(w);
      const float frac = at::rand({1}).item<float>();
      for (const std::array<float, 4>& b : std::vector<std::array<float, 4>>{
               {fw * 0.3f + frac, 10.0f, fw * 0.3f + frac + thin, fh - 10.0f},  // tall
               {10.0f, fh * 0.6f + frac, fw - 10.0f, fh * 0.6f + frac + thin},  // wide
               {0.0f, frac, thin, fh},                                          // left border
               {fw - thin, 0.0f, fw, fh * 0.8f},                                // right border
               {frac, 0.0f, fw, thin},                                          // top border
               {0.0f, fh - thin, fw * 0.7f, fh}}) {                             // bottom border
        coords.insert(coords.end(), b.begin(), b.end());
      }
    }
    const int64_t n = static_cast<int64_t>(coords.size()) / 4;
    const at::Tensor boxes = at::tensor(coords).view({n, 4});
    const at::Tensor masks = at::rand({n, 1, 28, 28});
    const at::Tensor cpu_values = mk::PasteMasks(masks, boxes, h, w);
    CAPTURE(h, w);
    CHECK(at::allclose(mk::PasteMasks(masks.to(kCuda), boxes.to(kCuda), h, w).cpu(), cpu_values,
                       1e-6, 1e-6));
    const at::Tensor gpu =
        mk::PasteMasksBinary(masks.to(kCuda), boxes.to(kCuda), h, w, 1, 0.5).cpu();
    const at::Tensor cpu = mk::PasteMasksBinary(masks, boxes, h, w, 1, 0.5);
    const at::Tensor near = (cpu_values - 0.5).abs() <= 1e-6;
    CHECK(at::equal(gpu.masked_fill(near, 0), cpu.masked_fill(near, 0)));
  }
}

TEST_CASE("mask rle changes cuda equal cpu", "[cuda]") {
  // Full-size pasted masks (what serving encodes), tiles cut mid-column, and the edges:
  // first and last pixel set, a change at every pixel, no mask, no pixel.
  at::manual_seed(40);
  const at::Tensor probabilities = at::rand({24, 1, 28, 28});
  const at::Tensor boxes = RandomBoxes(24, 700, 500) - 50;
  std::vector<at::Tensor> cases = {
      mk::PasteMasksBinary(probabilities, boxes, 800, 1333, 1, 0.5),
      (at::rand({3, 1, 2049, 3}) > 0.5).to(at::kByte),
      at::rand({4, 61, 83}) > 0.9,
      ((at::arange(517).view({517, 1}) + at::arange(333).view({1, 333})) % 2)
          .to(at::kByte)
          .view({1, 1, 517, 333}),
      at::ones({2, 1, 40, 50}, at::kByte),
      at::zeros({0, 1, 8, 8}, at::kByte),
      at::zeros({2, 1, 0, 8}, at::kByte)};
  at::Tensor corners = at::zeros({2, 1, 300, 700}, at::kByte);
  corners[0][0][0][0] = 1;
  corners[1][0][299][699] = 1;
  cases.push_back(corners);
  for (const at::Tensor& masks : cases) {
    CAPTURE(masks.sizes());
    const auto [cpu_changes, cpu_offsets] = mk::MaskRleChanges(masks);
    const auto [gpu_changes, gpu_offsets] = mk::MaskRleChanges(masks.to(kCuda));
    CHECK(gpu_changes.device() == kCuda);
    CHECK(SameIndices(gpu_offsets, cpu_offsets));
    CHECK(SameIndices(gpu_changes, cpu_changes));
  }
}

TEST_CASE("deform conv cuda equals cpu, forward and backward", "[cuda]") {
  at::manual_seed(41);
  struct Case {
    int64_t batch, channels, height, width, out_channels, kh, kw;
    std::array<int64_t, 2> stride, padding, dilation;
    int64_t groups, offset_groups;
    bool modulated;
    double offset_scale;  // large scales send most samples outside the map
  };
  const std::vector<Case> cases = {
      {2, 8, 13, 11, 6, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, 1, false, 2.0},
      {3, 8, 12, 15, 8, 3, 3, {2, 2}, {1, 1}, {1, 1}, 2, 2, true, 2.0},
      {2, 12, 10, 9, 8, 3, 2, {1, 2}, {2, 0}, {2, 1}, 4, 2, true, 30.0},
      {1, 4, 7, 7, 4, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, 1, false, 0.7},
      {2, 64, 20, 24, 64, 3, 3, {1, 1}, {2, 2}, {2, 2}, 32, 1, false, 3.0},
  };
  for (const Case& c : cases) {
    CAPTURE(c.channels, c.kh, c.kw, c.groups, c.offset_groups, c.modulated);
    const int64_t out_h =
        (c.height + 2 * c.padding[0] - c.dilation[0] * (c.kh - 1) - 1) / c.stride[0] + 1;
    const int64_t out_w =
        (c.width + 2 * c.padding[1] - c.dilation[1] * (c.kw - 1) - 1) / c.stride[1] + 1;
    const int64_t taps = c.offset_groups * c.kh * c.kw;
    std::vector<at::Tensor> cpu = {at::randn({c.batch, c.channels, c.height, c.width}),
                                   at::randn({c.batch, 2 * taps, out_h, out_w}) * c.offset_scale,
                                   at::rand({c.batch, taps, out_h, out_w}),
                                   at::randn({c.out_channels, c.channels / c.groups, c.kh, c.kw}),
                                   at::randn({c.out_channels})};
    // Integer offsets in half the taps: samples exactly on pixels and on the -1 / H borders.
    cpu[1] = at::where(at::rand(cpu[1].sizes()) < 0.5, cpu[1].round(), cpu[1]);
    std::vector<at::Tensor> gpu;
    for (at::Tensor& t : cpu) {
      gpu.push_back(t.to(kCuda).requires_grad_(true));
      t.requires_grad_(true);
    }
    const auto run = [&](const std::vector<at::Tensor>& t) {
      return mk::DeformConv2d(t[0], t[1],
                              c.modulated ? std::optional<at::Tensor>(t[2]) : std::nullopt, t[3],
                              t[4], c.stride, c.padding, c.dilation, c.groups, c.offset_groups);
    };
    const at::Tensor yc = run(cpu), yg = run(gpu);
    CHECK(at::allclose(yg.cpu(), yc, 1e-4, 1e-4));
    const at::Tensor grad = at::randn(yc.sizes());
    yc.backward(grad);
    yg.backward(grad.to(kCuda));
    for (size_t i = 0; i < cpu.size(); ++i) {
      if (i == 2 && !c.modulated) {
        continue;
      }
      CAPTURE(i);
      CHECK(at::allclose(gpu[i].grad().cpu(), cpu[i].grad(), 1e-4, 1e-3));
    }
  }
}
