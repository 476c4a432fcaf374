"""mrcnn::paste_masks against torchvision's paste_masks_in_image for boxes whose expanded
paste box (centre ± half-size × (M+2)/M, in float32, then truncated) ends just below or just
above an integer: the truncation decides the resized mask's size, so one ULP of difference in
that arithmetic moves every pixel of the paste. Includes issue 33's box, whose right edge
expands to 57.99995 in torchvision.
"""
import pytest
import torch
from torchvision.models.detection.roi_heads import expand_boxes, paste_masks_in_image

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def edge_boxes():
    """Boxes whose expanded right (and bottom) edge is meant to land a hair below or above an
    integer: x2 solved from x_c + w_half * s = R for R = k ± delta, s = (28 + 2) / 28."""
    s = 30 / 28
    boxes = [[38.244476, 466.10236, 57.31872, 571.6305]]  # issue 33's detection (label 57)
    for k in range(24, 64, 3):
        for delta in (-5e-5, -4e-6, 4e-6, 5e-5):
            target = k + delta
            x1 = k - 19.3 + (k % 5) * 0.137
            x2 = (2 * target - x1 * (1 - s)) / (1 + s)
            y1 = x1 / 2
            y2 = (2 * (target + 10) - y1 * (1 - s)) / (1 + s)
            boxes.append([x1, y1, x2, y2])
    return torch.tensor(boxes, dtype=torch.float32)


def test_the_sweep_reaches_both_sides_of_integers():
    # Without expanded edges a hair below and above integers the test would prove nothing.
    right = expand_boxes(edge_boxes(), 30 / 28)[:, 2]
    frac = right - right.floor()
    assert (frac > 0.9999).sum() >= 5 and (frac < 1e-4).sum() >= 5, frac


@pytest.mark.parametrize("device", DEVICES)
def test_paste_masks_equal_torchvision_at_integer_edges(mrcnn_ops, device):
    torch.manual_seed(0)
    boxes = edge_boxes()
    masks = torch.rand(boxes.size(0), 1, 28, 28) + 0.01  # positive: the support is the paste box
    theirs = paste_masks_in_image(masks, boxes, (640, 640), padding=1)
    ours = mrcnn_ops.paste_masks(masks.to(device), boxes.to(device), 640, 640, 1).cpu()
    for i in range(boxes.size(0)):
        assert torch.equal(ours[i] > 0, theirs[i] > 0), f"box {boxes[i].tolist()}: pasted region differs"
    torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-5)
