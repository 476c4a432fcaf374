"""COCO evaluation of a 5000-image result set: `trainer evaluate` vs pycocotools COCOeval
(loadRes + evaluate + accumulate + summarize) in the same run; the 12 numbers must agree.

usage: bench_coco_eval.py [--images 5000] [--dets 100] [--iou-type bbox|segm|both]
"""
import argparse
import contextlib
import io
import json
import os
import pathlib
import platform
import subprocess
import time

import numpy as np
from pycocotools import mask as mask_utils
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

BUILD = os.environ.get("MRCNN_BUILD_DIR", str(pathlib.Path(__file__).resolve().parents[2] / "build"))


def poly_in_box(rng, x, y, w, h, k=12):
    a = np.sort(rng.uniform(0, 2 * np.pi, k))
    r = rng.uniform(0.35, 0.5, k)
    return np.stack([x + w / 2 + r * w * np.cos(a), y + h / 2 + r * h * np.sin(a)], 1).reshape(-1).tolist()


def generate(n_images, dets_per_image, seed=0):
    rng = np.random.default_rng(seed)
    cats = [{"id": i + 1, "name": f"c{i}"} for i in range(80)]
    images, anns, results = [], [], []
    aid = 1
    for i in range(n_images):
        W, H = 640, 480
        images.append({"id": i + 1, "file_name": f"{i}.jpg", "width": W, "height": H})
        gts = []
        for _ in range(int(rng.poisson(7))):
            w, h = float(rng.uniform(5, 300)), float(rng.uniform(5, 250))
            x, y = float(rng.uniform(0, W - w)), float(rng.uniform(0, H - h))
            poly = poly_in_box(rng, x, y, w, h)
            rle = mask_utils.frPyObjects([poly], H, W)[0]
            g = {"id": aid, "image_id": i + 1, "category_id": int(rng.integers(1, 81)),
                 "bbox": [x, y, w, h], "area": float(mask_utils.area(rle)),
                 "iscrowd": int(rng.uniform() < 0.02), "segmentation": [poly]}
            aid += 1
            anns.append(g)
            gts.append(g)
        for _ in range(dets_per_image):
            if gts and rng.uniform() < 0.5:
                g = gts[int(rng.integers(0, len(gts)))]
                x, y, w, h = g["bbox"]
                j = rng.normal(0, 0.08, 4)
                x, y, w, h = x + j[0] * w, y + j[1] * h, w * (1 + j[2]), h * (1 + j[3])
                cat = g["category_id"]
            else:
                w, h = float(rng.uniform(5, 300)), float(rng.uniform(5, 250))
                x, y = float(rng.uniform(0, W - w)), float(rng.uniform(0, H - h))
                cat = int(rng.integers(1, 81))
            w, h = max(w, 1.0), max(h, 1.0)
            rle = mask_utils.frPyObjects([poly_in_box(rng, x, y, w, h)], H, W)[0]
            rle["counts"] = rle["counts"].decode()
            results.append({"image_id": i + 1, "category_id": cat, "bbox": [x, y, w, h],
                            "score": float(rng.uniform()), "segmentation": rle})
    return {"images": images, "annotations": anns, "categories": cats}, results


def run_pycocotools(gt_path, res_path, iou_type):
    t = time.time()
    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO(gt_path)
        dt = gt.loadRes(res_path)
        ev = COCOeval(gt, dt, iou_type)
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    return time.time() - t, np.array(ev.stats)


def run_ours(gt_path, res_path, iou_type, threads):
    out = res_path + f".{iou_type}.stats.json"
    t = time.time()
    subprocess.run([os.path.join(BUILD, "bin", "trainer"), "evaluate", "--annotations", gt_path,
                    "--results", res_path, "--iou-type", iou_type, "--output", out,
                    "--threads", str(threads)], check=True, capture_output=True)
    return time.time() - t, np.array(json.load(open(out))["stats_list"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--images", type=int, default=5000)
    ap.add_argument("--dets", type=int, default=100)
    ap.add_argument("--iou-type", default="both")
    ap.add_argument("--out", default="bench/out")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    gt_path = os.path.join(args.out, f"eval_gt_{args.images}.json")
    res_path = os.path.join(args.out, f"eval_res_{args.images}_{args.dets}.json")
    if not (os.path.exists(gt_path) and os.path.exists(res_path)):
        gt, res = generate(args.images, args.dets)
        json.dump(gt, open(gt_path, "w"))
        json.dump(res, open(res_path, "w"))
    print(f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} cores")
    print(f"{args.images} images, {args.dets} detections per image")
    types = ["bbox", "segm"] if args.iou_type == "both" else [args.iou_type]
    for t in types:
        theirs, s_theirs = run_pycocotools(gt_path, res_path, t)
        ours1, s1 = run_ours(gt_path, res_path, t, 1)
        ours_all, s_all = run_ours(gt_path, res_path, t, 0)
        diff = max(np.abs(s1 - s_theirs).max(), np.abs(s_all - s_theirs).max())
        print(f"[{t}] pycocotools {theirs:.2f} s | ours 1 thread {ours1:.2f} s "
              f"(ratio {theirs / ours1:.1f}x) | ours all cores {ours_all:.2f} s "
              f"(ratio {theirs / ours_all:.1f}x) | max |stat diff| {diff:.2e}")
        print(f"[{t}] AP {s_theirs[0]:.4f} AP50 {s_theirs[1]:.4f} (both)")


if __name__ == "__main__":
    main()
