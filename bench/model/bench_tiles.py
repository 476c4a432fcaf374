"""Tiled inference on large images (issue 26), with the shapes model of
test/trainer/model/shapes_model.py (ResNet-18-FPN, 128 px test size, 150 iterations):

1. speed: `tiles_bench` times a tiled 4000x3000 canvas per tile against lone requests of
   128 x 128 crops timed just before and just after it, in one process, with tiles in
   batches of 1 and of 4;
2. accuracy: `trainer predict` on the same canvas (200 shapes of 16-48 px) untiled (the whole
   image shrunk to 128 px) and tiled at the model's own scale (128 px tiles, 0.4 overlap):
   recall at IoU 0.5 and COCO AP / AP_small (pycocotools COCOeval), wall time and peak RSS;
3. memory: peak RSS of `trainer predict` tiled on an 8000x6000 canvas (800 shapes).

    MRCNN_BUILD_DIR=build .venv/bin/python bench/model/bench_tiles.py [--out bench/out/tiles]
        [--parts speed,accuracy,memory]
"""
import argparse
import contextlib
import io
import json
import os
import pathlib
import platform
import re
import subprocess
import sys
import time

import numpy as np
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "test" / "trainer" / "model"))
import shapes_canvas  # noqa: E402
import shapes_model  # noqa: E402

BUILD = shapes_model.BUILD
TILE, OVERLAP = 128, 0.4


def canvas(out: pathlib.Path, width, height, count, seed):
    path = out / f"canvas_{width}x{height}.png"
    if not path.exists():
        rng = np.random.default_rng(seed)
        img, anns = shapes_canvas.draw(width, height, shapes_canvas.grid_shapes(width, height, count, (16, 48), rng),
                                       rng)
        shapes_canvas.write(path, img)
        shapes_canvas.coco_json(path.with_suffix(".json"), path.name, width, height, anns)
    return path


def predict(model, image, out_json, *flags):
    """Runs trainer predict under /usr/bin/time -v: (detections, wall s, peak RSS MiB)."""
    start = time.time()
    done = subprocess.run(["/usr/bin/time", "-v", str(BUILD / "bin" / "trainer"), "predict", "--model-dir", str(model),
                           "--images", str(image), "--output", str(out_json), "--max-detections", "5000",
                           "--annotations", str(image.with_suffix(".json")), *flags],
                          check=True, capture_output=True, text=True)
    wall = time.time() - start
    rss_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr).group(1))
    return json.loads(out_json.read_text()), wall, rss_kb / 1024


def coco_ap(image, detections, iou_type):
    if not detections:
        return {"AP": 0.0, "AP50": 0.0, "AP_small": 0.0}
    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO(str(image.with_suffix(".json")))
        ev = COCOeval(gt, gt.loadRes(detections), iou_type)
        ev.params.maxDets = [1, 100, 1000]  # 200 shapes per image: COCO's 100 would cap recall
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    return {"AP": round(float(ev.stats[0]), 4), "AP50": round(float(ev.stats[1]), 4),
            "AP_small": round(float(ev.stats[3]), 4)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=str(ROOT / "bench" / "out" / "tiles"))
    parser.add_argument("--parts", default="speed,accuracy,memory")
    args = parser.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    model = shapes_model.trained_shapes_model(iterations=150)
    print(f"machine: {platform.node()}, {os.cpu_count()} cores; model {model}")

    parts = args.parts.split(",")
    image = canvas(out, 4000, 3000, 200, 26)
    for batch in (1, 4) if "speed" in parts else ():
        done = subprocess.run([str(BUILD / "bin" / "tiles_bench"), str(model), str(image), str(TILE), str(OVERLAP),
                               str(batch), "15", "1"], check=True, capture_output=True, text=True)
        print("speed:", done.stdout.strip())

    anns = json.loads(image.with_suffix(".json").read_text())["annotations"]
    for gt in anns:
        gt["segmentation"]["counts"] = gt["segmentation"]["counts"].encode()
    runs = (("untiled", []), ("tiled", ["--tile-size", str(TILE), "--tile-overlap", str(OVERLAP)]))
    for name, flags in runs if "accuracy" in parts else ():
        dets, wall, rss = predict(model, image, out / f"{name}.json", *flags)
        row = {"run": name, "detections": len(dets), "wall_s": round(wall, 1), "peak_rss_mib": round(rss),
               "recall_box_iou50": round(shapes_canvas.recall(anns, dets), 3),
               "bbox": coco_ap(image, dets, "bbox"), "segm": coco_ap(image, dets, "segm")}
        print("4000x3000:", json.dumps(row))

    if "memory" in parts:
        big = canvas(out, 8000, 6000, 800, 27)
        for name, flags in (("untiled", []), ("tiled", ["--tile-size", str(TILE), "--tile-overlap", str(OVERLAP)])):
            dets, wall, rss = predict(model, big, out / f"big_{name}.json", *flags)
            print("8000x6000:", json.dumps({"run": name, "detections": len(dets), "wall_s": round(wall, 1),
                                            "peak_rss_mib": round(rss)}))


if __name__ == "__main__":
    main()
