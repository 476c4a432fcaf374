"""mrcnn::mask_rle_changes against pycocotools' encoder: the runs its change points give,
written as COCO's compressed counts string, equal pycocotools.mask.encode's byte for byte
(CPU; CUDA too when a GPU is present)."""
import numpy as np
import pytest
import torch
from pycocotools import mask as mask_utils

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def runs_from_changes(changes, height, width):
    """The RLE counts the change points stand for (the first run counts zeros)."""
    bounds = [0] + [int(c) for c in changes] + [height * width]
    return [b - a for a, b in zip(bounds, bounds[1:])]


def counts_string(runs, height, width):
    """COCO's compressed counts string of uncompressed runs, by pycocotools itself."""
    return mask_utils.frPyObjects({"counts": runs, "size": [height, width]}, height, width)["counts"]


def cases(ops, g):
    # Pasted 28x28 probabilities of random boxes, some past the image's edges (what serving
    # encodes: paste_masks_binary, torchvision's paste thresholded), random blobs, the
    # edges (first/last pixel, full, empty, a change at every pixel), one row and one column.
    n, height, width = 20, 480, 640
    xy = torch.rand(n, 2, generator=g) * 600 - 50
    boxes = torch.cat([xy, xy + torch.rand(n, 2, generator=g) * 400 + 1], dim=1)
    yield ops.paste_masks_binary(torch.rand(n, 1, 28, 28, generator=g), boxes, height, width, 1, 0.5)
    yield (torch.rand(7, 1, 53, 91, generator=g) > 0.7).to(torch.uint8)
    edges = torch.zeros(4, 1, 31, 17, dtype=torch.uint8)
    edges[0, 0, 0, 0] = 1
    edges[1, 0, -1, -1] = 1
    edges[2] = 1
    yield edges
    yield ((torch.arange(37).view(37, 1) + torch.arange(29).view(1, 29)) % 2).to(torch.uint8).view(1, 1, 37, 29)
    yield torch.rand(3, 1, 1, 200, generator=g) > 0.5
    yield torch.rand(3, 1, 200, 1, generator=g) > 0.5


@pytest.mark.parametrize("device", DEVICES)
def test_mask_rle_changes_equal_pycocotools(mrcnn_ops, device):
    g = torch.Generator().manual_seed(40)
    for case, masks in enumerate(cases(mrcnn_ops, g)):
        changes, offsets = mrcnn_ops.mask_rle_changes(masks.to(device))
        assert changes.device.type == device and changes.dtype == torch.int32 and offsets.dtype == torch.int64
        changes, offsets = changes.cpu(), offsets.cpu()
        n, height, width = masks.shape[0], masks.shape[-2], masks.shape[-1]
        assert offsets.tolist()[0] == 0 and offsets.tolist()[-1] == changes.numel()
        bytes_ = masks.reshape(n, height, width).to(torch.uint8).numpy()
        for i in range(n):
            theirs = mask_utils.encode(np.asfortranarray(bytes_[i]))
            runs = runs_from_changes(changes[offsets[i]:offsets[i + 1]], height, width)
            assert counts_string(runs, height, width) == theirs["counts"], f"case {case}, mask {i}"
