"""ResizeBilinearLikePil (trainer/data/pil_bilinear_resize.h) against Pillow's
Image.resize(size, Image.BILINEAR), the resize Detectron2 applies to uint8 images: random
images (noise, which shows any weight or rounding difference, and smooth gradients) resized up
and down, to odd sizes, from and to one pixel, at extreme aspect ratios, grey and RGB, some
through a view whose rows are wider than the image (a tile of a larger image), some with
each pass split into row ranges run out of order (as threads would run them)."""
import os
import pathlib
import struct
import subprocess

import numpy as np
from PIL import Image

BUILD = os.environ.get("MRCNN_BUILD_DIR", str(pathlib.Path(__file__).resolve().parents[3] / "build"))
TOOL = os.path.join(BUILD, "tests", "pil_resize_tool")


def random_image(rng, h, w, c):
    if rng.random() < 0.5:
        return rng.integers(0, 256, (h, w, c), dtype=np.uint8)
    ys, xs = np.meshgrid(np.linspace(0, 1, h), np.linspace(0, 1, w), indexing="ij")
    phase = rng.uniform(0, 6, c)
    planes = [127.5 + 127.5 * np.sin(3 * xs + 5 * ys * ys + p) for p in phase]
    return np.clip(np.stack(planes, -1) + rng.normal(0, 8, (h, w, c)), 0, 255).astype(np.uint8)


def cases(seed):
    rng = np.random.default_rng(seed)
    sizes = [((1, 1), (1, 1)), ((1, 1), (7, 5)), ((9, 13), (1, 1)), ((1, 500), (3, 7)),
             ((640, 2), (17, 1)), ((2, 3), (301, 299)), ((480, 640), (800, 1067)),
             ((1080, 1920), (750, 1333)), ((427, 320), (1067, 800)), ((101, 103), (101, 57)),
             ((64, 64), (64, 64)), ((33, 700), (1, 1400)),
             # Either side of where Pillow changes the order of its two passes.
             ((60, 60), (2, 31)), ((60, 60), (2, 32)), ((100, 30), (80, 20)), ((100, 30), (80, 21))]
    for _ in range(120):
        h, w = int(rng.integers(1, 400)), int(rng.integers(1, 400))
        factor_h, factor_w = np.exp(rng.uniform(-2.5, 2.5, 2))
        sizes.append(((h, w), (max(1, int(h * factor_h)), max(1, int(w * factor_w)))))
    for i, ((h, w), (oh, ow)) in enumerate(sizes):
        c = 1 if i % 4 == 1 else 3
        yield random_image(rng, h, w, c), oh, ow, i % 3


def test_resize_matches_pillow():
    all_cases = list(cases(7))
    payload = bytearray()
    for image, oh, ow, view in all_cases:
        h, w, c = image.shape
        payload += struct.pack("<5i", h, w, c, oh, ow) + image.tobytes() + struct.pack("<i", view)
    proc = subprocess.run([TOOL], input=bytes(payload), capture_output=True, timeout=300)
    assert proc.returncode == 0, proc.stderr.decode()
    offset, total, exact, worst = 0, 0, 0, 0
    for image, oh, ow, _ in all_cases:
        c = image.shape[2]
        n = oh * ow * c
        ours = np.frombuffer(proc.stdout, np.uint8, n, offset).reshape(oh, ow, c)
        offset += n
        pil = Image.fromarray(image[:, :, 0] if c == 1 else image)
        theirs = np.asarray(pil.resize((ow, oh), Image.BILINEAR)).reshape(oh, ow, c)
        diff = np.abs(ours.astype(np.int32) - theirs.astype(np.int32))
        total += diff.size
        exact += int((diff == 0).sum())
        worst = max(worst, int(diff.max()))
        assert diff.max() <= 1, f"{image.shape} -> {(oh, ow)}: off by {diff.max()}"
    assert offset == len(proc.stdout)
    print(f"{len(all_cases)} resizes, {total} values: {exact / total:.6%} equal to Pillow, worst {worst}")
    # Equal arithmetic gives equal bytes: any difference is a difference of algorithm.
    assert exact == total
