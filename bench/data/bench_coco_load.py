"""Annotation loading: CocoDataset::Load vs pycocotools COCO() on a generated file the size
of instances_train2017.json (~450 MB: 118k images, 860k polygon annotations, 80 classes).

usage: bench_coco_load.py [--images 118287] [--out bench/out/instances_big.json]
"""
import argparse
import json
import os
import pathlib
import platform
import subprocess
import time

import numpy as np

BUILD = os.environ.get("MRCNN_BUILD_DIR", str(pathlib.Path(__file__).resolve().parents[2] / "build"))


def generate(path, n_images, seed=0):
    rng = np.random.default_rng(seed)
    cats = [{"id": i + 1 + (i // 10), "name": f"class{i}", "supercategory": "s"} for i in range(80)]
    with open(path, "w") as f:
        f.write('{"info": {"description": "synthetic, instances_train2017-sized"}, "licenses": [],')
        f.write('"images": [')
        for i in range(n_images):
            if i:
                f.write(",")
            f.write(json.dumps({"license": 1, "file_name": f"{i + 1:012d}.jpg",
                                "coco_url": f"http://images.example/train2017/{i + 1:012d}.jpg",
                                "height": 480, "width": 640, "date_captured": "2013-11-14 11:18:45",
                                "flickr_url": "http://farm.example/x.jpg", "id": i + 1}))
        f.write('], "annotations": [')
        ann_id = 1
        first = True
        for i in range(n_images):
            for _ in range(int(rng.poisson(7.3))):
                k = int(rng.integers(6, 60))
                poly = np.round(rng.uniform(0, 480, 2 * k), 2).tolist()
                x, y = float(rng.uniform(0, 500)), float(rng.uniform(0, 400))
                ann = {"segmentation": [poly], "area": float(np.round(rng.uniform(10, 50000), 4)),
                       "iscrowd": 0, "image_id": i + 1,
                       "bbox": [round(x, 2), round(y, 2), round(float(rng.uniform(1, 140)), 2),
                                round(float(rng.uniform(1, 80)), 2)],
                       "category_id": cats[int(rng.integers(0, 80))]["id"], "id": ann_id}
                ann_id += 1
                f.write(("" if first else ",") + json.dumps(ann))
                first = False
        f.write('], "categories": ' + json.dumps(cats) + "}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--images", type=int, default=118287)
    ap.add_argument("--out", default="bench/out/instances_big.json")
    args = ap.parse_args()
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    if not os.path.exists(args.out):
        t = time.time()
        generate(args.out, args.images)
        print(f"generated {args.out} in {time.time() - t:.1f} s")
    size_mb = os.path.getsize(args.out) / 1e6
    proc = subprocess.run([os.path.join(BUILD, "bin", "bench_coco_load"), args.out, "1"],
                          capture_output=True, text=True, check=True)
    ours = json.loads(proc.stdout)
    from pycocotools.coco import COCO
    t = time.time()
    coco = COCO(args.out)
    theirs = time.time() - t
    assert len(coco.imgs) == ours["images"] and len(coco.anns) == ours["annotations"]
    print(f"machine: {platform.node()} {platform.processor() or platform.machine()}, {os.cpu_count()} cores")
    print(f"file: {size_mb:.0f} MB, {ours['images']} images, {ours['annotations']} annotations")
    print(f"pycocotools COCO(): {theirs:.2f} s")
    print(f"CocoDataset::Load training view: {ours['train_view_s']:.2f} s  "
          f"ratio {theirs / ours['train_view_s']:.1f}x")
    print(f"CocoDataset::Load evaluation view: {ours['eval_view_s']:.2f} s  "
          f"ratio {theirs / ours['eval_view_s']:.1f}x")


if __name__ == "__main__":
    main()
