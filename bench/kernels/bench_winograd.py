#!/usr/bin/env python3
"""mrcnn::conv3x3_winograd (CPU, F(2x2,3x3), F(4x4,3x3) and F(6x6,3x3)) against torch's own 3x3
convolution (oneDNN) on the shapes Mask R-CNN runs at 480x640: mask head (100 RoIs at
14x14), FPN/RPN levels, and the backbone's middle convs. Same process, same threads,
same inputs, timed round-robin. Prints median times, the speed ratio (>1 = Winograd faster) and each
result's error against a float64 convolution, relative to the output's largest value.

Usage: bench_winograd.py [--threads N] [--repeats R]
Loads $MRCNN_BUILD_DIR/lib/libmrcnn_kernels.so (default: build/ next to bench/).
"""
import argparse
import os
import pathlib
import statistics
import time

import torch
import torch.nn.functional as F

SHAPES = [(100, 256, 14, 14), (1, 256, 120, 160), (1, 256, 60, 80), (1, 256, 30, 40),
          (1, 256, 15, 20), (1, 64, 120, 160), (1, 128, 60, 80), (1, 512, 15, 20)]


def interleaved_medians(fns, repeats):
    """Median ms of each function, timed round-robin (one call of each per round after one
    untimed call each), so that a slow spell of a shared machine hits them all alike."""
    for fn in fns.values():
        fn()
    times = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append((time.perf_counter() - start) * 1e3)
    return {name: statistics.median(t) for name, t in times.items()}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    build = pathlib.Path(os.environ.get("MRCNN_BUILD_DIR", pathlib.Path(__file__).resolve().parents[2] / "build"))
    torch.ops.load_library(str(build / "lib" / "libmrcnn_kernels.so"))
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    print(f"threads {args.threads}, median of {args.repeats}")
    with torch.no_grad():
        for shape in SHAPES:
            n, c, h, w = shape
            x = torch.randn(shape)
            weight = torch.randn(c, c, 3, 3) * 0.05
            bias = torch.randn(c)
            reference = F.conv2d(x.double(), weight.double(), bias.double(), padding=1)
            scale = reference.abs().max()

            def error(y):
                return ((y.double() - reference).abs().max() / scale).item()

            weights = {tile: torch.ops.mrcnn.conv3x3_winograd_weight(weight, tile) for tile in (2, 4, 6)}
            fns = {"direct": lambda: F.conv2d(x, weight, bias, padding=1)}
            for tile, u in weights.items():
                fns[tile] = lambda u=u, tile=tile: torch.ops.mrcnn.conv3x3_winograd(x, u, bias, False, tile)
            ms = interleaved_medians(fns, args.repeats)
            parts = [f"{str(shape):20s} direct {ms['direct']:7.1f} ms (err {error(fns['direct']()):.1e})"]
            for tile in weights:
                parts.append(f"F({tile}x{tile}) {ms[tile]:7.1f} ms {ms['direct'] / ms[tile]:4.2f}x "
                             f"(err {error(fns[tile]()):.1e})")
            print(" | ".join(parts), flush=True)


if __name__ == "__main__":
    main()
