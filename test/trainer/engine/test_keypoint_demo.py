"""The keypoint demo (issue 52's acceptance): Keypoint R-CNN trained from scratch on
`trainer make-shapes --keypoints` (128 px, 400 images) with the demo's CPU config
(configs/keypoint_rcnn_shapes_cpu.yaml, 300 iterations, ~2 min on two cores) reaches an OKS AP50
of at least 0.5 on the validation images: as the training job's own evaluation reports it
(metrics.jsonl), and as `trainer evaluate --iou-type keypoints` computes it from `trainer
predict`'s results, the two agreeing; its validation pictures show the keypoints."""
import io
import json
import pathlib
import subprocess

import numpy as np
from PIL import Image
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from engine_test_job import ENTRYPOINT, TRAINER, entrypoint_env

CONFIGS = pathlib.Path(__file__).resolve().parents[3] / "configs"


def test_the_keypoint_demo_reaches_oks_ap50_of_half(tmp_path):
    configs = CONFIGS
    shapes = tmp_path / "shapes"
    subprocess.run([str(TRAINER), "make-shapes", "--output", str(shapes), "--train", "400", "--val", "50",
                    "--size", "128", "--seed", "1", "--keypoints"], check=True, capture_output=True)
    base = tmp_path / "opt_ml"
    (base / "input" / "config").mkdir(parents=True)
    (base / "input" / "data").mkdir(parents=True)
    (base / "input" / "data" / "train").symlink_to(shapes)
    (base / "input" / "data" / "val").symlink_to(shapes)
    (base / "input" / "config" / "hyperparameters.json").write_text(json.dumps({
        "config-file": "keypoint_rcnn_shapes_cpu.yaml",
        "opts": "SOLVER.CHECKPOINT_PERIOD 100000 TENSORBOARD.EVAL_IMAGES 3"}))
    done = subprocess.run([str(ENTRYPOINT), "train", "--base-dir", str(base)],
                          env=entrypoint_env(MRCNN_CONFIG_DIR=str(configs)), capture_output=True, text=True,
                          timeout=1500)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    records = [json.loads(line) for line in (base / "output" / "data" / "metrics.jsonl").read_text().splitlines()]
    final = [r for r in records if "keypoints/AP50" in r]
    assert final, records[-2:]
    job_ap50 = final[-1]["keypoints/AP50"]

    predictions = tmp_path / "val.json"
    images = sorted((shapes / "val").glob("*.png"))
    subprocess.run([str(TRAINER), "predict", "--model-dir", str(base / "model"), "--images", *map(str, images),
                    "--annotations", str(shapes / "annotations" / "instances_val.json"), "--output",
                    str(predictions), "--precision", "fp32"], check=True, capture_output=True, timeout=600)
    stats = tmp_path / "stats.json"
    subprocess.run([str(TRAINER), "evaluate", "--annotations", str(shapes / "annotations" / "instances_val.json"),
                    "--results", str(predictions), "--iou-type", "keypoints", "--oks-sigmas",
                    "0.05,0.05,0.05,0.05", "--output", str(stats)], check=True, capture_output=True, timeout=120)
    ap50 = json.loads(stats.read_text())["stats"]["AP50"]
    print(f"keypoint demo: OKS AP50 {ap50:.3f} (trainer evaluate), {job_ap50:.3f} (the job's evaluation)")
    assert ap50 >= 0.5
    assert abs(ap50 - job_ap50) < 0.02  # same model, same images (the job's loader resizes alike)
    assert_pictures_show_keypoints(base, shapes, json.loads(predictions.read_text()))


def assert_pictures_show_keypoints(base, shapes, results):
    """The validation pictures (TENSORBOARD.EVAL_IMAGES) draw each keypoint as a white dot:
    where `trainer predict` puts the keypoints of confident detections (drawn from 0.5), the
    picture is white, which neither the shapes, the boxes nor the labels ever are. Margins
    (0.55, 0.07) keep detections and keypoints near the drawing thresholds (0.5, 0.05) out."""
    events = EventAccumulator(str(base / "output" / "tensorboard"), size_guidance={"images": 0})
    events.Reload()
    ids = {i["file_name"]: i["id"]
           for i in json.loads((shapes / "annotations" / "instances_val.json").read_text())["images"]}
    white = checked = 0
    for tag in events.Tags()["images"]:
        picture = np.asarray(Image.open(io.BytesIO(events.Images(tag)[-1].encoded_image_string)).convert("RGB"))
        name = tag.split("/", 1)[1]
        for r in results:
            if r["image_id"] != ids[name] or r["score"] < 0.55:
                continue
            points = r["keypoints"]
            for x, y, score in zip(points[0::3], points[1::3], points[2::3]):
                if score >= 0.07:
                    checked += 1
                    white += bool((picture[round(y), round(x)] == 255).all())
    # A later detection's box or label may cross a dot: most, not all.
    assert checked >= 10 and white >= 0.8 * checked, (white, checked)
