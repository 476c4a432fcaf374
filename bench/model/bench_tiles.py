"""Tiled inference on large images (issue 26), with the shapes model of
test/trainer/model/shapes_model.py (ResNet-18-FPN, 128 px test size, 150 iterations):

1. speed: `tiles_bench` times a tiled 4000x3000 canvas per tile against lone requests of
   128 x 128 crops timed just before and just after it, in one process, with tiles in
   batches of 1 and of 4;
2. accuracy: `trainer predict` on the same canvas (200 shapes of 16-48 px) untiled (the whole
   image shrunk to 128 px) and tiled at the model's own scale (128 px tiles, 0.4 overlap):
   recall at IoU 0.5 and COCO AP / AP_small (pycocotools COCOeval), wall time and peak RSS;
3. memory: peak RSS of `trainer predict` tiled on an 8000x6000 canvas (800 shapes);
4. crop-train (INPUT.CROP, not in the default parts): the same config trained instead on
   random 256x256 crops at native resolution of `trainer make-shapes --canvas 1024x768`
   images (shapes of 16-160 px), test size 256, then `trainer predict` on a held-out
   2000x1500 canvas (60 shapes of 16-160 px: COCO small, medium and large) untiled (shrunk to
   341x256), untiled at native scale (the test size set to the image's: what tiles
   approximate), by 256 px tiles (overlap 0.5: 128 px), and by tiles plus the whole-image
   pass: recall at IoU 0.5, COCO box/mask AP, AP50, AP_small/medium/large, wall time, peak RSS.
   Peer: the same schedule on the whole canvases shrunk to 341x256 (no crop), untiled and by
   768 px tiles (shrunk by the same 1/3 it was trained at).

    MRCNN_BUILD_DIR=build .venv/bin/python bench/model/bench_tiles.py [--out bench/out/tiles]
        [--parts speed,accuracy,memory,crop-train] [--crop-iterations 300]
"""
import argparse
import contextlib
import io
import json
import os
import pathlib
import platform
import re
import shutil
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
        return {"AP": 0.0, "AP50": 0.0, "AP_small": 0.0, "AP_medium": 0.0, "AP_large": 0.0}
    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO(str(image.with_suffix(".json")))
        ev = COCOeval(gt, gt.loadRes(detections), iou_type)
        ev.params.maxDets = [1, 100, 1000]  # 200 shapes per image: COCO's 100 would cap recall
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    # -1 (COCO's "no such object") where the canvas holds no object of that size.
    return {"AP": round(float(ev.stats[0]), 4), "AP50": round(float(ev.stats[1]), 4),
            "AP_small": round(float(ev.stats[3]), 4), "AP_medium": round(float(ev.stats[4]), 4),
            "AP_large": round(float(ev.stats[5]), 4)}


CROP, CROP_OVERLAP = 256, 0.5
# The peer trained without the crop sees the 1024x768 canvases shrunk to 341x256 (1/3), so it
# is served by tiles of 768 px, which the test size shrinks by the same 1/3.
WHOLE_TILE = 768
TRAIN_OPTS = [f"INPUT.MIN_SIZE_TRAIN [{CROP}]", "INPUT.MAX_SIZE_TRAIN 1333", f"INPUT.MIN_SIZE_TEST {CROP}",
              "INPUT.MAX_SIZE_TEST 1333", "TEST.DETECTIONS_PER_IMAGE 100", "SOLVER.CHECKPOINT_PERIOD 100000"]
CROP_OPTS = ["INPUT.CROP.ENABLED True", "INPUT.CROP.TYPE absolute", f"INPUT.CROP.SIZE [{CROP}, {CROP}]"]


def canvas_dataset(out: pathlib.Path) -> pathlib.Path:
    """40 training canvases of 1024x768 with 24 shapes of 16-160 px each (`make-shapes --canvas`)."""
    data = out / "canvas_train_1024x768"
    if not (data / "annotations" / "instances_train.json").exists():
        subprocess.run([str(BUILD / "bin" / "trainer"), "make-shapes", "--output", str(data), "--canvas",
                        "1024x768", "--objects", "24", "--object-size", "16-160", "--train", "40", "--val", "0",
                        "--seed", "11"], check=True, capture_output=True)
    return data


def canvas_trained_model(out: pathlib.Path, iterations: int, crop: bool):
    """The shapes config trained `iterations` x 8 images on the canvases: on 256x256 crops at
    native resolution (crop), or on the whole canvases shrunk to a 256 px shortest edge.
    Returns (model dir, training wall seconds); kept in `out`, keyed by the schedule."""
    work = out / (f"crop{CROP}_it{iterations}" if crop else f"whole_it{iterations}")
    model, timing = work / "opt_ml" / "model", work / "train_seconds.txt"
    if (model / "model.safetensors").exists() and timing.exists():
        return model, float(timing.read_text())
    shutil.rmtree(work, ignore_errors=True)
    base = work / "opt_ml"
    (base / "input" / "config").mkdir(parents=True)
    (base / "input" / "data").mkdir(parents=True)
    (base / "input" / "data" / "train").symlink_to(canvas_dataset(out))
    opts = TRAIN_OPTS + (CROP_OPTS if crop else []) + [f"SOLVER.MAX_ITER {iterations}"]
    (base / "input" / "config" / "hyperparameters.json").write_text(json.dumps({
        "config-file": "mask_rcnn_R_50_FPN_shapes_cpu.yaml", "opts": " ".join(opts)}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SM_", "MASTER_", "RANK", "WORLD_", "LOCAL_"))}
    env.update(MRCNN_TRAINER=str(BUILD / "bin" / "trainer"), MRCNN_CONFIG_DIR=str(ROOT / "configs"))
    start = time.time()
    done = subprocess.run([str(BUILD / "bin" / "entrypoint"), "train", "--base-dir", str(base)], env=env,
                          capture_output=True, text=True)
    seconds = time.time() - start
    if done.returncode != 0:
        raise RuntimeError("training on the canvases failed:\n" + (done.stdout + done.stderr)[-3000:])
    timing.write_text(f"{seconds:.1f}")
    return model, seconds


def at_native_scale(model: pathlib.Path, width, height):
    """A copy of the model dir whose test size is the image's own: one untiled pass over the
    whole image at native resolution, what the tiles approximate (with 10x the proposals, as
    the image holds many tiles' worth of objects)."""
    native = model.parent / "model_native"
    native.mkdir(exist_ok=True)
    for name in ("model.safetensors", "classes.json"):
        shutil.copy(model / name, native / name)
    config = (model / "config.yaml").read_text()
    config = re.sub(r"MIN_SIZE_TEST: \d+", f"MIN_SIZE_TEST: {min(width, height)}", config)
    config = re.sub(r"MAX_SIZE_TEST: \d+", f"MAX_SIZE_TEST: {max(width, height)}", config)
    config = re.sub(r"(PRE|POST)_NMS_TOPK_TEST: (\d+)", lambda m: f"{m[1]}_NMS_TOPK_TEST: {int(m[2]) * 10}",
                    config)
    (native / "config.yaml").write_text(config)
    return native


def crop_train(out: pathlib.Path, iterations: int):
    cropped, crop_s = canvas_trained_model(out, iterations, crop=True)
    whole, whole_s = canvas_trained_model(out, iterations, crop=False)
    print(f"crop-train: {iterations} iterations of 8 images; on {CROP}x{CROP} crops {crop_s:.0f} s, "
          f"on whole canvases {whole_s:.0f} s")
    path = out / "heldout_2000x1500.png"
    if not path.exists():
        rng = np.random.default_rng(126)
        img, anns = shapes_canvas.draw(2000, 1500, shapes_canvas.grid_shapes(2000, 1500, 60, (16, 160), rng), rng)
        shapes_canvas.write(path, img)
        shapes_canvas.coco_json(path.with_suffix(".json"), path.name, 2000, 1500, anns)
    anns = json.loads(path.with_suffix(".json").read_text())["annotations"]
    for gt in anns:
        gt["segmentation"]["counts"] = gt["segmentation"]["counts"].encode()
    tiles = ["--tile-size", str(CROP), "--tile-overlap", str(CROP_OVERLAP)]
    runs = (("crops: untiled", cropped, []), ("crops: untiled, native scale", at_native_scale(cropped, 2000, 1500), []),
            ("crops: tiled", cropped, tiles), ("crops: tiled+whole", cropped, tiles + ["--tile-full-image"]),
            ("whole: untiled", whole, []),
            ("whole: tiled 768", whole, ["--tile-size", str(WHOLE_TILE), "--tile-overlap", str(CROP_OVERLAP)]))
    for name, weights, flags in runs:
        dets, wall, rss = predict(weights, path, out / ("crop_train_" + re.sub(r"\W+", "_", name) + ".json"), *flags)
        row = {"run": name, "detections": len(dets), "wall_s": round(wall, 1), "peak_rss_mib": round(rss),
               "recall_box_iou50": round(shapes_canvas.recall(anns, dets), 3),
               "bbox": coco_ap(path, dets, "bbox"), "segm": coco_ap(path, dets, "segm")}
        print("crop-train 2000x1500:", json.dumps(row))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=str(ROOT / "bench" / "out" / "tiles"))
    parser.add_argument("--parts", default="speed,accuracy,memory")
    parser.add_argument("--crop-iterations", type=int, default=300)
    args = parser.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    parts = args.parts.split(",")
    print(f"machine: {platform.node()}, {os.cpu_count()} cores, load average {os.getloadavg()}")
    if "crop-train" in parts:
        crop_train(out, args.crop_iterations)
    if not {"speed", "accuracy", "memory"} & set(parts):
        return
    model = shapes_model.trained_shapes_model(iterations=150)
    print(f"model {model}")

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
