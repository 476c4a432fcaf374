#!/usr/bin/env python3
"""Masks to COCO RLE: encoded where the masks are (mrcnn::mask_rle_changes, then the counts
strings on the host) vs today's host path (the pasted masks copied to the host as bytes and
encoded there: pycocotools' encoder, which ours equals byte for byte), same masks, one run.

The masks are what serving encodes for one image: 100 detections' 28x28 probabilities pasted
into an 800x1333 image (paste_masks_binary), boxes from 8 to 400 px. Prints, per path, the
bytes that cross from the masks' device to the host and the median time from pasted masks to
counts strings, and the ratio (host path / ours: > 1 = ours is faster). On a CPU "crossing"
is a copy in memory; the bytes are the point there, the GPU run gives the times.

A third path is what `--mask-rle host` and other pixel consumers get (issue 40): each mask's
paste box (the paste's own integer corners, clamped to the image) gathered where the masks are,
packed eight pixels to a byte (on a GPU; PackMaskBits) and copied; its bytes and the time from
pasted masks to those bits on the host (the host then unpacks them and encodes only them) are
printed, and the gathered pixels are checked to hold every foreground pixel.

Usage: bench_mask_rle.py [--device cpu|cuda] [--detections N] [--size HxW] [--repeats R]
Loads $MRCNN_BUILD_DIR/lib/libmrcnn_kernels.so (default: the checkout's build/).
"""
import argparse
import os
import pathlib
import sys

import numpy as np
import torch
from pycocotools import mask as mask_utils

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from bench_kernels import timed  # noqa: E402  (median of repeats, a GPU synchronised around each)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--detections", type=int, default=100)
    parser.add_argument("--size", default="800x1333")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    build = pathlib.Path(os.environ.get("MRCNN_BUILD_DIR", REPO / "build"))
    torch.ops.load_library(str(build / "lib" / "libmrcnn_kernels.so"))
    ops = torch.ops.mrcnn
    height, width = map(int, args.size.split("x"))
    g = torch.Generator().manual_seed(40)
    n = args.detections
    xy = torch.rand(n, 2, generator=g) * torch.tensor([width, height])
    boxes = torch.cat([xy, xy + torch.rand(n, 2, generator=g) * 392 + 8], 1)
    probabilities = torch.rand(n, 1, 28, 28, generator=g)
    masks = ops.paste_masks_binary(probabilities.to(args.device), boxes.to(args.device), height, width, 1, 0.5)

    def ours():
        changes, offsets = ops.mask_rle_changes(masks)
        changes, offsets = changes.cpu().numpy(), offsets.cpu().numpy()
        strings = []
        for i in range(n):
            bounds = np.concatenate([[0], changes[offsets[i]:offsets[i + 1]], [height * width]])
            runs = np.diff(bounds).astype(np.uint32).tolist()
            strings.append(mask_utils.frPyObjects({"counts": runs, "size": [height, width]}, height, width)["counts"])
        return strings, changes.nbytes + offsets.nbytes

    def host():
        pixels = masks.cpu().numpy()
        strings = [mask_utils.encode(np.asfortranarray(pixels[i, 0]))["counts"] for i in range(n)]
        return strings, pixels.nbytes

    def paste_boxes():
        # kernels::PasteBoxes for R = 28, padding 1, in the same ATen operations.
        scale = 30 / 28
        x1, y1, x2, y2 = boxes_on_device.unbind(1)
        w_half, h_half = (x2 - x1) * 0.5 * scale, (y2 - y1) * 0.5 * scale
        x_c, y_c = (x2 + x1) * 0.5, (y2 + y1) * 0.5
        corners = torch.stack([x_c - w_half, y_c - h_half, x_c + w_half, y_c + h_half], 1).long().cpu()
        regions, offsets = [], [0]
        for c0, r0, c1, r1 in corners.tolist():
            x0, y0 = min(max(c0, 0), width), min(max(r0, 0), height)
            xe, ye = min(max(c1 + 1, x0), width), min(max(r1 + 1, y0), height)
            regions.append((x0, y0, xe, ye))
            offsets.append(offsets[-1] + (xe - x0) * (ye - y0))
        flat = torch.empty(offsets[-1], dtype=torch.uint8, device=masks.device)
        for k, (x0, y0, xe, ye) in enumerate(regions):
            flat[offsets[k]:offsets[k + 1]].view(ye - y0, xe - x0).copy_(masks[k, 0, y0:ye, x0:xe])
        shifts = torch.arange(7, -1, -1, dtype=torch.int32, device=flat.device)
        padded = torch.nn.functional.pad(flat, (0, -flat.numel() % 8))
        packed = (padded.view(-1, 8).int() << shifts).sum(1).to(torch.uint8)
        return packed.cpu(), regions, offsets, corners.nbytes

    boxes_on_device = boxes.to(args.device)
    packed, regions, crop_offsets, corner_bytes = paste_boxes()
    crops = np.unpackbits(packed.numpy())[:crop_offsets[-1]]
    inside = sum(int(crops[crop_offsets[k]:crop_offsets[k + 1]].sum()) for k in range(n))
    assert inside == masks.count_nonzero().item(), "a foreground pixel lies outside its paste box"
    boxes_bytes = packed.nbytes + corner_bytes
    t_boxes = timed(paste_boxes, args.device, args.repeats)
    (ours_strings, ours_bytes), (host_strings, host_bytes) = ours(), host()
    assert ours_strings == host_strings, "the two paths' counts strings differ"
    t_ours, t_host = timed(ours, args.device, args.repeats), timed(host, args.device, args.repeats)
    print(f"device {args.device} ({torch.cuda.get_device_name() if args.device == 'cuda' else 'host CPU'}), "
          f"{n} masks of {height}x{width}, {masks.count_nonzero().item()} foreground pixels, strings equal")
    print(f"  to the host: ours {ours_bytes / 1e6:.3f} MB (change points), host path {host_bytes / 1e6:.1f} MB "
          f"(pixels): {host_bytes / ours_bytes:.0f}x less")
    print(f"  masks -> counts strings: ours {t_ours * 1e3:.1f} ms, host path {t_host * 1e3:.1f} ms, "
          f"ratio {t_host / t_ours:.2f}")
    print(f"  pixels by paste box, as bits: {boxes_bytes / 1e6:.2f} MB to the host ({crop_offsets[-1] / 1e6:.2f} MB "
          f"as bytes; {host_bytes / boxes_bytes:.0f}x less than whole masks), every foreground pixel inside; "
          f"masks -> those bits on the host {t_boxes * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
