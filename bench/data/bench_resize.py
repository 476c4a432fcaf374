"""Resize speed: our Pillow-equal bilinear (trainer/data/pil_bilinear_resize.h) against Pillow
itself and cv::resize INTER_LINEAR, in the same run, on uint8 RGB noise; and the Detectron2
inference input path before (float interpolate in the model) and now (uint8 resize on the
host, then the float conversion). Prints each measure's median and the ratios.

usage: MRCNN_BUILD_DIR=build .venv/bin/python bench/data/bench_resize.py [--repeats 20] [--threads 2]
"""
import argparse
import os
import pathlib
import subprocess
import time

import numpy as np
from PIL import Image

BUILD = os.environ.get("MRCNN_BUILD_DIR", str(pathlib.Path(__file__).resolve().parents[2] / "build"))
# (input height, width) -> (output height, width): COCO's 480 x 640 enlarged to the 800 test
# size, a 1080p frame shrunk to 750 x 1333, a 12 MP photo shrunk to 1000 x 1333.
CASES = [((480, 640), (800, 1067)), ((1080, 1920), (750, 1333)), ((3000, 4000), (1000, 1333))]


def pillow_ms(h, w, oh, ow, repeats):
    image = Image.fromarray(np.random.default_rng(1).integers(0, 256, (h, w, 3), dtype=np.uint8))
    image.resize((ow, oh), Image.BILINEAR)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        image.resize((ow, oh), Image.BILINEAR)
        times.append((time.perf_counter() - start) * 1000)
    return float(np.median(times))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    for (h, w), (oh, ow) in CASES:
        run = subprocess.run([os.path.join(BUILD, "bin", "bench_resize"), str(h), str(w), str(oh), str(ow),
                              str(args.repeats), str(args.threads)], capture_output=True, text=True, check=True)
        ours = {name: float(ms) for name, ms in (line.split() for line in run.stdout.splitlines())}
        pil = pillow_ms(h, w, oh, ow, args.repeats)
        print(f"{h}x{w} -> {oh}x{ow}: ours {ours['pil_equal_1_thread']:.2f} ms, Pillow {pil:.2f} ms "
              f"({pil / ours['pil_equal_1_thread']:.2f}x), cv::resize INTER_LINEAR "
              f"{ours['opencv_linear_1_thread']:.2f} ms ({ours['opencv_linear_1_thread'] / ours['pil_equal_1_thread']:.2f}x); "
              f"model input on {args.threads} threads: before (float interpolate) "
              f"{ours['before_float_interpolate']:.2f} ms, now (uint8 resize + float) "
              f"{ours['now_uint8_pil_equal_then_float']:.2f} ms "
              f"({ours['before_float_interpolate'] / ours['now_uint8_pil_equal_then_float']:.2f}x)")


if __name__ == "__main__":
    main()
