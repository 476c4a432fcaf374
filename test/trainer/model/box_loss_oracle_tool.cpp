// Evaluates the box regression losses (trainer/model/box_losses.h) and their gradients for
// the Python oracle test (test/oracle/model/test_box_loss_oracle.py):
//   box_loss_oracle_tool INPUT.safetensors OUTPUT.safetensors
// INPUT: pred_boxes, target_boxes (N×4), deltas (N×4), reference (N×4), weights (4).
// OUTPUT: giou (GiouLossSum(pred_boxes, target_boxes)), giou_grad (its gradient w.r.t.
// pred_boxes), decoded_giou (BoxRegressionLossSum(giou, deltas, ..., reference,
// target_boxes, weights)), decoded_giou_grad (w.r.t. deltas), smooth_l1 and its gradient,
// diou and ciou (DistanceIouLossSum(pred_boxes, target_boxes)) and their gradients.
#include <torch/torch.h>

#include <array>
#include <cstdio>
#include <exception>

#include "trainer/model/box_losses.h"
#include "trainer/model/safetensors.h"

using namespace mrcnn;

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s INPUT OUTPUT\n", argv[0]);
    return 2;
  }
  try {
    const model::TensorMap in = model::ReadSafetensors(argv[1]);
    const at::Tensor w = in.at("weights").to(torch::kDouble).contiguous();
    const std::array<double, 4> weights = {w[0].item<double>(), w[1].item<double>(),
                                           w[2].item<double>(), w[3].item<double>()};
    model::TensorMap out;
    at::Tensor pred = in.at("pred_boxes").clone().requires_grad_(true);
    at::Tensor giou = model::GiouLossSum(pred, in.at("target_boxes"));
    giou.backward();
    out["giou"] = giou.detach();
    out["giou_grad"] = pred.grad();
    for (const bool complete : {false, true}) {
      at::Tensor boxes = in.at("pred_boxes").clone().requires_grad_(true);
      at::Tensor value = model::DistanceIouLossSum(boxes, in.at("target_boxes"), complete);
      value.backward();
      const std::string name = complete ? "ciou" : "diou";
      out[name] = value.detach();
      out[name + "_grad"] = boxes.grad();
    }
    for (const auto loss : {model::BoxRegLoss::kGiou, model::BoxRegLoss::kSmoothL1}) {
      at::Tensor deltas = in.at("deltas").clone().requires_grad_(true);
      const at::Tensor target_deltas = in.at("target_deltas");
      at::Tensor value = model::BoxRegressionLossSum(
          loss, deltas, target_deltas, in.at("reference"), in.at("target_boxes"), weights);
      value.backward();
      const std::string name = loss == model::BoxRegLoss::kGiou ? "decoded_giou" : "smooth_l1";
      out[name] = value.detach();
      out[name + "_grad"] = deltas.grad();
    }
    model::WriteSafetensors(argv[2], out);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "box_loss_oracle_tool: %s\n", e.what());
    return 1;
  }
  return 0;
}
