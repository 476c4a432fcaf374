"""The box regression losses against torchvision: GIoU against
torchvision.ops.generalized_box_iou_loss (value and gradient, overlapping, disjoint,
nested, identical and degenerate boxes), GIoU on decoded deltas against torchvision's
BoxCoder.decode_single followed by that loss (value and gradient w.r.t. the deltas), and
smooth L1 (beta 1/9) against torch.nn.functional.smooth_l1_loss, and DIoU / CIoU against
torchvision.ops.distance_box_iou_loss / complete_box_iou_loss (Detectron2's diou_loss /
ciou_loss compute the same)."""
import os
import pathlib
import subprocess

import pytest
import torch
import torch.nn.functional as F
import torchvision
from safetensors.torch import load_file, save_file
from torchvision.models.detection._utils import BoxCoder

BUILD = pathlib.Path(os.environ.get("MRCNN_BUILD_DIR", pathlib.Path(__file__).resolve().parents[3] / "build"))
TOOL = BUILD / "tests" / "box_loss_oracle_tool"


def random_boxes(n, generator, scale=100.0):
    xy = torch.rand(n, 2, generator=generator, dtype=torch.float64) * scale
    wh = torch.rand(n, 2, generator=generator, dtype=torch.float64) * scale / 2 + 1
    return torch.cat([xy, xy + wh], 1)


def run_tool(tmp_path, tensors):
    if not TOOL.exists():
        pytest.fail(f"{TOOL} is not built (set MRCNN_BUILD_DIR)")
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(tmp_path / "in.safetensors"))
    subprocess.run([str(TOOL), str(tmp_path / "in.safetensors"), str(tmp_path / "out.safetensors")], check=True)
    return load_file(str(tmp_path / "out.safetensors"))


@pytest.mark.parametrize("seed", range(6))
def test_giou_and_smooth_l1_match_torchvision(tmp_path, seed):
    g = torch.Generator().manual_seed(seed)
    n = 257
    target = random_boxes(n, g)
    pred = random_boxes(n, g)
    # Cases a random draw rarely makes: identical, nested, disjoint far apart, touching,
    # and a degenerate (zero-area) prediction.
    pred[0] = target[0]
    pred[1] = torch.tensor([target[1, 0] + 1, target[1, 1] + 1, target[1, 2] - 0.5, target[1, 3] - 0.5])
    pred[2] = target[2] + 500
    pred[3] = torch.tensor([target[3, 2], target[3, 1], target[3, 2] + 10, target[3, 3]])
    pred[4] = torch.tensor([target[4, 0], target[4, 1], target[4, 0], target[4, 3]])
    reference = random_boxes(n, g)
    weights = torch.tensor([10.0, 10.0, 5.0, 5.0]) if seed % 2 == 0 else torch.tensor([20.0, 20.0, 10.0, 10.0])
    coder = BoxCoder(weights=tuple(weights.tolist()))
    deltas = torch.randn(n, 4, generator=g, dtype=torch.float64) * 0.5
    target_deltas = coder.encode_single(target, reference)
    ours = run_tool(tmp_path, {"pred_boxes": pred.float(), "target_boxes": target.float(), "deltas": deltas.float(),
                               "target_deltas": target_deltas.float(), "reference": reference.float(),
                               "weights": weights})

    # float64 references, so the comparison measures our float32 rounding only.
    p = pred.clone().requires_grad_(True)
    theirs = torchvision.ops.generalized_box_iou_loss(p, target, reduction="sum", eps=1e-7)
    theirs.backward()
    torch.testing.assert_close(ours["giou"].double(), theirs.detach(), rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(ours["giou_grad"].double(), p.grad, rtol=1e-4, atol=1e-5)

    d = deltas.clone().requires_grad_(True)
    decoded = coder.decode_single(d, reference)
    theirs = torchvision.ops.generalized_box_iou_loss(decoded, target, reduction="sum", eps=1e-7)
    theirs.backward()
    torch.testing.assert_close(ours["decoded_giou"].double(), theirs.detach(), rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(ours["decoded_giou_grad"].double(), d.grad, rtol=1e-4, atol=1e-5)

    d = deltas.clone().requires_grad_(True)
    theirs = F.smooth_l1_loss(d, target_deltas, beta=1.0 / 9, reduction="sum")
    theirs.backward()
    torch.testing.assert_close(ours["smooth_l1"].double(), theirs.detach(), rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(ours["smooth_l1_grad"].double(), d.grad, rtol=1e-4, atol=1e-5)

    for name, reference_loss in (("diou", torchvision.ops.distance_box_iou_loss),
                                 ("ciou", torchvision.ops.complete_box_iou_loss)):
        p = pred.clone().requires_grad_(True)
        theirs = reference_loss(p, target, reduction="sum", eps=1e-7)
        theirs.backward()
        torch.testing.assert_close(ours[name].double(), theirs.detach(), rtol=1e-5, atol=1e-4)
        torch.testing.assert_close(ours[name + "_grad"].double(), p.grad, rtol=1e-4, atol=1e-5)
