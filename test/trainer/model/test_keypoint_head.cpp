// Keypoint R-CNN's head: its targets and decoding held to Detectron2's formulas on hand-made
// cases, and the model's keypoint branch in training (a loss that trains) and inference.
#include <torch/torch.h>

#include <catch2/catch.hpp>

#include "test/trainer/model/small_model_config.h"
#include "trainer/model/meta_arch/meta_arch.h"
#include "trainer/model/roi_heads/keypoint_roi_heads.h"

using namespace mrcnn::model;

TEST_CASE("keypoint targets: the cell under each labelled point inside its box", "[keypoints]") {
  // Box 10..50 x 20..60 (40 px), a 4x4 heatmap: 10 px per cell.
  const at::Tensor boxes = torch::tensor({{10.0f, 20.0f, 50.0f, 60.0f}});
  const at::Tensor points = torch::tensor({{{10.0f, 20.0f, 2.0f},     // first cell
                                            {35.0f, 41.0f, 1.0f},     // x cell 2, y cell 2
                                            {50.0f, 60.0f, 2.0f},     // on the far edges: last cell
                                            {9.9f, 30.0f, 2.0f},      // left of the box
                                            {30.0f, 30.0f, 0.0f}}});  // unlabelled
  const auto [cells, valid] = KeypointHeatmapTargets(points, boxes, 4);
  CHECK(cells[0][0].item<int64_t>() == 0);
  CHECK(cells[0][1].item<int64_t>() == 2 * 4 + 2);
  CHECK(cells[0][2].item<int64_t>() == 15);
  CHECK(valid[0].to(torch::kLong).equal(torch::tensor({1, 1, 1, 0, 0}, torch::kLong)));
  CHECK(cells[0][3].item<int64_t>() == 0);  // invalid cells are 0, as Detectron2 leaves them
}

TEST_CASE("keypoint decoding finds each heatmap's peak in its box", "[keypoints]") {
  // Two keypoints on 8x8 heatmaps over a 16x16 box at (100, 200): the bicubic resize to
  // 16x16 keeps a sharp peak at twice its cell (+ the half-pixel centre).
  at::Tensor maps = torch::full({1, 2, 8, 8}, -10.0f);
  maps[0][0][2][5] = 10.0f;
  maps[0][1][6][1] = 10.0f;
  const at::Tensor boxes = torch::tensor({{100.0f, 200.0f, 116.0f, 216.0f}});
  const at::Tensor points = HeatmapsToKeypoints(maps, boxes);
  REQUIRE(points.sizes() == torch::IntArrayRef({1, 2, 3}));
  // The peak of the 16x16 map: cell 5 -> pixel 10 or 11; its centre is +0.5.
  CHECK(points[0][0][0].item<float>() >= 110.5f);
  CHECK(points[0][0][0].item<float>() <= 111.5f);
  CHECK(points[0][0][1].item<float>() >= 204.5f);
  CHECK(points[0][0][1].item<float>() <= 205.5f);
  CHECK(points[0][1][0].item<float>() <= 103.5f);
  CHECK(points[0][1][1].item<float>() >= 212.5f);
  // Score: the peak's softmax probability over the 8x8 map, with the peak's value taken
  // from the resized map: a flat map's is 1/64 (bicubic keeps a constant), a spike's is
  // exp(resized peak - 10) (the other cells add ~63 e^-20).
  const at::Tensor flat = HeatmapsToKeypoints(torch::full({1, 1, 8, 8}, 3.0f), boxes);
  CHECK(flat[0][0][2].item<float>() == Approx(1.0 / 64));
  const float resized_peak =
      at::upsample_bicubic2d(maps, {16, 16}, false)[0][0].max().item<float>();
  CHECK(points[0][0][2].item<float>() == Approx(std::exp(resized_peak - 10.0f)).epsilon(1e-4));
  // Non-square, fractional box: coordinates scale with width / ceil(width).
  const at::Tensor wide = HeatmapsToKeypoints(maps, torch::tensor({{0.0f, 0.0f, 31.5f, 8.0f}}));
  CHECK(wide[0][0][0].item<float>() > 15.0f);
  CHECK(wide[0][0][0].item<float>() < 31.5f);
  CHECK(HeatmapsToKeypoints(torch::zeros({0, 2, 8, 8}), torch::zeros({0, 4})).size(0) == 0);
}

namespace {

ModelConfig KeypointConfig() {
  ModelConfig c = mrcnn::test::SmallModelConfig();
  c.mask_on = false;
  c.keypoint_on = true;
  c.num_keypoints = 4;
  c.keypoint_conv_dims = {16, 16};
  c.min_size_train = {128};
  c.max_size_train = 128;
  c.min_size_test = 128;
  c.max_size_test = 128;
  return c;
}

}  // namespace

TEST_CASE("a keypoint model trains its keypoint loss and predicts keypoints", "[keypoints]") {
  torch::manual_seed(0);
  auto model = BuildModel(KeypointConfig());
  // torchvision's module layout: roi_heads.keypoint_head.{0,2} and the predictor beside it.
  const auto params = model->named_parameters();
  CHECK(params.contains("roi_heads.keypoint_head.0.weight"));
  CHECK(params.contains("roi_heads.keypoint_head.2.bias"));
  CHECK(params.contains("roi_heads.keypoint_predictor.kps_score_lowres.weight"));
  CHECK(params["roi_heads.keypoint_predictor.kps_score_lowres.weight"].sizes() ==
        torch::IntArrayRef({16, 4, 4, 4}));

  const at::Tensor image = torch::rand({3, 128, 128});
  ImageTarget target;
  target.boxes = torch::tensor({{20.0f, 30.0f, 90.0f, 100.0f}});
  target.labels = torch::tensor({1}, torch::kLong);
  target.keypoints = torch::tensor(
      {{{20.5f, 30.5f, 2.0f}, {89.5f, 30.5f, 2.0f}, {89.5f, 99.5f, 2.0f}, {0.0f, 0.0f, 0.0f}}});
  model->train();
  // The keypoint branch's own parameters: the loss must fall through the head alone (the
  // whole network at this rate diverges on one image, which says nothing of the head).
  std::vector<at::Tensor> keypoint_params;
  for (const auto& p : model->named_parameters())
    if (p.key().find("keypoint") != std::string::npos)
      keypoint_params.push_back(p.value());
  REQUIRE(keypoint_params.size() == 6);
  torch::optim::SGD sgd(keypoint_params, torch::optim::SGDOptions(0.01).momentum(0.9));
  float first = 0, last = 0;
  for (int step = 0; step < 30; ++step) {
    auto out = model->forward({image}, std::vector<ImageTarget>{target});
    REQUIRE(out.losses.contains("loss_keypoint"));
    CHECK_FALSE(out.losses.contains("loss_mask"));
    const at::Tensor loss = out.losses["loss_keypoint"];
    INFO("step " << step << " losses " << out.losses);
    REQUIRE(std::isfinite(loss.item<float>()));
    if (step == 0)
      first = loss.item<float>();
    last = loss.item<float>();
    sgd.zero_grad();
    loss.backward();
    sgd.step();
  }
  // Softmax over a 56x56 heatmap starts near log(3136) = 8.05; training lowers it.
  CHECK(first > 6.0f);
  CHECK(last < first - 1.0f);

  // An image whose instances have no keypoints at all trains with a zero keypoint loss.
  ImageTarget bare = target;
  bare.keypoints = at::Tensor();
  auto bare_out = model->forward({image}, std::vector<ImageTarget>{bare});
  CHECK(bare_out.losses["loss_keypoint"].item<float>() == 0.0f);

  model->eval();
  model->detection_settings().score_thresh = 0.0;
  torch::NoGradGuard no_grad;
  auto detections = TakeInstances(model->forward({torch::rand({3, 96, 160})}));
  REQUIRE(detections.size() == 1);
  const ImageResult& r = detections[0];
  REQUIRE(r.keypoints.defined());
  CHECK(r.keypoints.sizes() == torch::IntArrayRef({r.boxes.size(0), 4, 3}));
  if (r.boxes.size(0) > 0) {
    // Every keypoint lies in (or on) its detection's box, in original image pixels.
    const at::Tensor x = r.keypoints.select(2, 0), y = r.keypoints.select(2, 1);
    CHECK(x.ge(r.boxes.select(1, 0).unsqueeze(1) - 1e-3).all().item<bool>());
    CHECK(x.le(r.boxes.select(1, 2).unsqueeze(1) + 1.0).all().item<bool>());
    CHECK(y.ge(r.boxes.select(1, 1).unsqueeze(1) - 1e-3).all().item<bool>());
    CHECK(y.le(r.boxes.select(1, 3).unsqueeze(1) + 1.0).all().item<bool>());
  }
}
