#!/usr/bin/env python3
"""Golden data for DefaultPredictor's resize, made with Detectron2 itself: what its
DefaultPredictor returns for images that it has to resize (ResizeShortestEdge to
INPUT.MIN_SIZE_TEST / MAX_SIZE_TEST with Pillow's bilinear on uint8, then the outputs scaled
back to the input's size by detector_postprocess).

The inputs are the golden images (test/data/detectron2/images) resized with Pillow's
Image.BILINEAR to sizes whose short side is not MIN_SIZE_TEST (RESIZED_INPUTS: shrinks,
an enlargement and one capped by MAX_SIZE_TEST), so they are not stored: resized_inputs()
makes the same pixels again anywhere Pillow is (its resize is exact integer arithmetic), and
each entry records its pixels' SHA-256 for the test to check.

    /work/d2ref/venv/bin/python scripts/detectron2_resize_golden.py --detectron2 /work/d2ref/src \\
        --golden test/data/detectron2

writes <golden>/<variant>/expected_resized.json for each variant (default: the R50-FPN and
R50-DC5 mask models and the R50-FPN keypoint model): {input name: {height, width, sha256, resized_to: [h, w] (the size
DefaultPredictor's model saw), boxes, scores, classes[, masks][, keypoints]}}, in
expected.json's layout (detectron2_golden.instances_to_json).
"""
import argparse
import hashlib
import json
import os
import pathlib
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from detectron2_golden import build_cfg, import_detectron2, instances_to_json, read_rgb  # noqa: E402

# (golden image, input height, input width). With MIN_SIZE_TEST 320 / MAX_SIZE_TEST 533
# DefaultPredictor resizes them to: 320 x 427 (a 2/3 shrink), 427 x 320 (an enlargement by
# 1.42), 320 x 500 (a shrink by 2.19) and 152 x 533 (the long side capped).
RESIZED_INPUTS = [
    ("synthetic_0_h320_w427.png", 480, 641),
    ("synthetic_1_h427_w320.png", 300, 225),
    ("synthetic_2_h320_w500.png", 700, 1094),
    ("synthetic_2_h320_w500.png", 200, 700),
]
DEFAULT_VARIANTS = ["mask_rcnn_R_50_FPN", "mask_rcnn_R_50_DC5", "keypoint_rcnn_R_50_FPN"]


def resized_inputs(image_dir):
    """[(input name, RGB uint8 array)]: each golden image resized with Pillow's bilinear."""
    from PIL import Image

    inputs = []
    for source, height, width in RESIZED_INPUTS:
        with Image.open(os.path.join(image_dir, source)) as image:
            rgb = np.asarray(image.convert("RGB").resize((width, height), Image.BILINEAR)).copy()
        inputs.append((f"{pathlib.Path(source).stem}_as_h{height}_w{width}.png", rgb))
    return inputs


def pixels_sha256(rgb):
    return hashlib.sha256(np.ascontiguousarray(rgb).tobytes()).hexdigest()


def predict_resized(variant_dir, inputs):
    """DefaultPredictor (a fresh model from the variant's model_final.pth and config.yaml) on
    each input; checks that it resizes every one of them."""
    from detectron2.engine import DefaultPredictor

    cfg = build_cfg(None, None, config_yaml=os.path.join(variant_dir, "config.yaml"))
    cfg.MODEL.WEIGHTS = os.path.join(variant_dir, "model_final.pth")
    predictor = DefaultPredictor(cfg)
    results = {}
    for name, rgb in inputs:
        bgr = np.ascontiguousarray(rgb[:, :, ::-1])  # DefaultPredictor takes BGR
        resized = predictor.aug.get_transform(bgr).apply_image(bgr)
        if resized.shape == bgr.shape:
            raise RuntimeError(f"{name}: DefaultPredictor does not resize it; pick another size")
        entry = instances_to_json(predictor(bgr)["instances"].to("cpu"), rgb.shape[0], rgb.shape[1])
        entry["sha256"] = pixels_sha256(rgb)
        entry["resized_to"] = [int(resized.shape[0]), int(resized.shape[1])]
        results[name] = entry
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--detectron2", required=True, help="folder holding Detectron2's detectron2/ and configs/")
    parser.add_argument("--golden", required=True, help="test/data/detectron2: images/ and the variant folders")
    parser.add_argument("--variants", nargs="+", default=DEFAULT_VARIANTS)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    args = parser.parse_args()
    import_detectron2(args.detectron2)
    import torch

    torch.set_num_threads(args.threads)
    inputs = resized_inputs(os.path.join(args.golden, "images"))
    for variant in args.variants:
        variant_dir = os.path.join(args.golden, variant)
        results = predict_resized(variant_dir, inputs)
        with open(os.path.join(variant_dir, "expected_resized.json"), "w") as f:
            json.dump(results, f)
        counts = {name: len(entry["scores"]) for name, entry in results.items()}
        print(variant, counts)


if __name__ == "__main__":
    main()
