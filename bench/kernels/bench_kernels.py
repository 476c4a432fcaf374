#!/usr/bin/env python3
"""mrcnn kernels vs torchvision.ops, same inputs, same process, same thread count.

Usage: bench_kernels.py [--device cpu|cuda] [--threads N] [--repeats R] [--quick]
Loads $MRCNN_BUILD_DIR/lib/libmrcnn_kernels.so (default /work/main/build). Prints one
line per case: absolute median times and ours/theirs speed ratio (>1 = we are faster).
"""
import argparse
import os
import pathlib
import platform
import statistics
import time

import torch
import torchvision
from torchvision.ops import MultiScaleRoIAlign


def machine() -> str:
    cpu = platform.processor() or "unknown cpu"
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} logical cores"


def timed(fn, device, repeats, warmup=1):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if device == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def proposals(g, n, device, height=800, width=1333):
    xy = torch.rand(n, 2, generator=g) * torch.tensor([width, height])
    wh = torch.rand(n, 2, generator=g) * 300 + 8
    boxes = torch.cat([xy, (xy + wh).minimum(torch.tensor([width, height]))], 1)
    return boxes.to(device), torch.rand(n, generator=g).to(device)


def report(rows, name, ours, theirs, shape):
    ratio = theirs / ours
    rows.append((name, shape, ours, theirs, ratio))
    print(f"{name:<34} {shape:<44} ours {ours * 1e3:9.2f} ms  torchvision {theirs * 1e3:9.2f} ms  "
          f"ratio {ratio:5.2f}x", flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="smaller ROIAlign batch (2 images)")
    args = parser.parse_args()
    build = pathlib.Path(os.environ.get("MRCNN_BUILD_DIR", str(pathlib.Path(__file__).resolve().parents[2] / "build")))
    torch.ops.load_library(str(build / "lib" / "libmrcnn_kernels.so"))
    ops = torch.ops.mrcnn
    torch.set_num_threads(args.threads)
    dev = args.device
    print(f"machine: {machine()}; device {dev}"
          + (f" ({torch.cuda.get_device_name()})" if dev == "cuda" else "")
          + f"; torch {torch.__version__}, torchvision {torchvision.__version__}; threads {torch.get_num_threads()}")
    g = torch.Generator().manual_seed(0)
    rows = []
    images = 8

    for n in (1000, 5000, 20000):
        batch = [proposals(g, n, dev) for _ in range(images)]
        ours = timed(lambda: [ops.nms(b, s, 0.7) for b, s in batch], dev, args.repeats)
        theirs = timed(lambda: [torchvision.ops.nms(b, s, 0.7) for b, s in batch], dev, args.repeats)
        for b, s in batch:
            assert torch.equal(ops.nms(b, s, 0.7), torchvision.ops.nms(b, s, 0.7))
        report(rows, "nms (8 images, 1 call each)", ours, theirs, f"{n} boxes/image, iou 0.7")

    for n, classes in ((1000, 80), (5000, 5), (20000, 5)):
        batch = [proposals(g, n, dev) + (torch.randint(0, classes, (n,), generator=g).to(dev),)
                 for _ in range(images)]
        ours = timed(lambda: [ops.batched_nms(b, s, i, 0.7) for b, s, i in batch], dev, args.repeats)
        theirs = timed(lambda: [torchvision.ops.batched_nms(b, s, i, 0.7) for b, s, i in batch], dev,
                       args.repeats)
        for b, s, i in batch:
            assert torch.equal(ops.batched_nms(b, s, i, 0.7), torchvision.ops.batched_nms(b, s, i, 0.7))
        report(rows, "batched_nms (8 images)", ours, theirs, f"{n} boxes/image, {classes} ids")

    roi_images = 2 if args.quick else images
    names = ["0", "1", "2", "3"]
    feats = {name: torch.rand(roi_images, 256, (800 + 2 ** (i + 2) - 1) // 2 ** (i + 2),
                              (1344 + 2 ** (i + 2) - 1) // 2 ** (i + 2), generator=g).to(dev)
             for i, name in enumerate(names)}
    boxes = [proposals(g, 512, dev)[0] for _ in range(roi_images)]
    pooler = MultiScaleRoIAlign(names, 7, 2)
    sizes = [(800, 1333)] * roi_images
    pooler(feats, boxes, sizes)  # lets torchvision infer its scales
    rois = torch.cat([torch.cat([torch.full((len(b), 1), float(i), device=dev), b], 1)
                      for i, b in enumerate(boxes)])
    feat_list = [feats[n] for n in names]
    shape = f"{roi_images}x512 rois, 4 levels, C=256, 7x7, sr 2"
    with torch.no_grad():
        ours = timed(lambda: ops.multi_level_roi_align(feat_list, rois, pooler.scales, 7, 7, 2, False), dev,
                     args.repeats)
        theirs = timed(lambda: pooler(feats, boxes, sizes), dev, args.repeats)
        torch.testing.assert_close(ops.multi_level_roi_align(feat_list, rois, pooler.scales, 7, 7, 2, False),
                                   pooler(feats, boxes, sizes), rtol=1e-5, atol=1e-5)
    report(rows, "multi-level roi_align forward", ours, theirs, shape)

    leaves = [f.clone().requires_grad_(True) for f in feat_list]
    leaves_tv = {n: f.clone().requires_grad_(True) for n, f in feats.items()}
    grad = torch.rand(len(rois), 256, 7, 7, generator=g).to(dev)

    def ours_fb():
        ops.multi_level_roi_align(leaves, rois, pooler.scales, 7, 7, 2, False).backward(grad)

    def theirs_fb():
        pooler(leaves_tv, boxes, sizes).backward(grad)

    ours = timed(ours_fb, dev, max(2, args.repeats // 2))
    theirs = timed(theirs_fb, dev, max(2, args.repeats // 2))
    report(rows, "multi-level roi_align fwd+bwd", ours, theirs, shape)
    del leaves, leaves_tv, feats, feat_list

    for n, m in ((20, 200000), (1000, 1000)):
        a, _ = proposals(g, n, dev)
        b, _ = proposals(g, m, dev)
        ours = timed(lambda: ops.box_iou(a, b), dev, args.repeats)
        theirs = timed(lambda: torchvision.ops.box_iou(a, b), dev, args.repeats)
        report(rows, "box_iou", ours, theirs, f"{n} x {m}")

    masks = torch.rand(100, 1, 28, 28, generator=g).to(dev)
    det, _ = proposals(g, 100, dev)
    from torchvision.models.detection.roi_heads import paste_masks_in_image
    ours = timed(lambda: ops.paste_masks(masks, det, 800, 1333, 1), dev, args.repeats)
    theirs = timed(lambda: paste_masks_in_image(masks, det, (800, 1333), 1), dev, args.repeats)
    report(rows, "paste_masks", ours, theirs, "100 masks 28x28 into 800x1333")

    worst = min(r[4] for r in rows)
    print(f"geometric mean ratio {statistics.geometric_mean([r[4] for r in rows]):.2f}x, worst {worst:.2f}x")


if __name__ == "__main__":
    main()
