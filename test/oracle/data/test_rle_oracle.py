"""The mask API against pycocotools: RLE strings of random polygons byte for byte, merge,
area, toBbox, frBbox and IoU (plain and crowd)."""
import json
import os
import pathlib
import subprocess

import numpy as np
from pycocotools import mask as mask_utils

BUILD = os.environ.get("MRCNN_BUILD_DIR", str(pathlib.Path(__file__).resolve().parents[3] / "build"))
TOOL = os.path.join(BUILD, "tests", "rle_oracle_tool")


def random_cases(n, seed):
    rng = np.random.default_rng(seed)
    cases = []
    for i in range(n):
        h, w = int(rng.integers(1, 300)), int(rng.integers(1, 300))
        polys = []
        for _ in range(int(rng.integers(1, 4))):
            k = int(rng.integers(3, 12))
            # Some vertices outside the image, some on the grid, some fractional.
            xs = rng.uniform(-20, w + 20, k)
            ys = rng.uniform(-20, h + 20, k)
            if i % 4 == 0:
                xs, ys = np.round(xs), np.round(ys)
            poly = []
            for x, y in zip(xs, ys):
                poly += [float(x), float(y)]
            polys.append(poly)
        box = [float(rng.uniform(-5, w)), float(rng.uniform(-5, h)), float(rng.uniform(0.5, w)),
               float(rng.uniform(0.5, h))]
        cases.append({"h": h, "w": w, "polygons": polys, "box": box})
    return cases


def test_rle_matches_pycocotools_byte_for_byte():
    cases = random_cases(400, 1234)
    proc = subprocess.run([TOOL], input=json.dumps(cases), capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    ours = json.loads(proc.stdout)
    assert len(ours) == len(cases)
    for c, o in zip(cases, ours):
        h, w = c["h"], c["w"]
        rles = mask_utils.frPyObjects(c["polygons"], h, w)
        assert [r["counts"].decode() for r in rles] == o["polygons"]
        merged = mask_utils.merge(rles)
        assert merged["counts"].decode() == o["merged"]
        assert mask_utils.merge(rles, intersect=True)["counts"].decode() == o["intersected"]
        assert int(mask_utils.area(merged)) == o["area"]
        assert list(mask_utils.toBbox(merged)) == o["bbox"]
        fb = mask_utils.frPyObjects(np.array([c["box"]], dtype=np.float64), h, w)[0]
        assert fb["counts"].decode() == o["box"]
        assert o["roundtrip"]
        iou = mask_utils.iou(rles, [fb], [0]).reshape(-1).tolist()
        iou_crowd = mask_utils.iou(rles, [fb], [1]).reshape(-1).tolist()
        assert iou == o["iou"]
        assert iou_crowd == o["iou_crowd"]
