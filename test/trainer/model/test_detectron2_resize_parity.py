"""Detectron2 models resize their input as DefaultPredictor does (issue 60): `trainer predict
--precision fp32` on images that DefaultPredictor has to resize (the golden images resized with
Pillow to other sizes: two shrinks, an enlargement and one capped by MAX_SIZE_TEST; made again
here by scripts/detectron2_resize_golden.py's resized_inputs) is matched one to one against
what Detectron2's DefaultPredictor returned for them (expected_resized.json, written by that
script with Detectron2 itself): boxes within 0.5 px and scores within 2e-3 (in the input's
pixels, after the scale back) for at least 95 % of Detectron2's detections, the same classes,
a mean mask IoU of at least 0.97 for the mask models, and 95 % of the keypoints within 1 px.
A resize that differs from Pillow's bilinear, a size rounded otherwise than int(x + 0.5), or
outputs scaled back wrongly move boxes by pixels and fail it."""
import json
import pathlib
import sys

import numpy as np
import pytest
from PIL import Image

from test_detectron2_parity import GOLDEN, REPO, predict

sys.path.insert(0, str(REPO / "scripts"))
from detectron2_compare import compare_predictions  # noqa: E402
from detectron2_resize_golden import DEFAULT_VARIANTS, pixels_sha256, resized_inputs  # noqa: E402


@pytest.mark.parametrize("variant", DEFAULT_VARIANTS)
def test_resized_inputs_predict_as_default_predictor(variant, tmp_path):
    expected = json.loads((GOLDEN / variant / "expected_resized.json").read_text())
    paths = []
    for name, rgb in resized_inputs(GOLDEN / "images"):
        assert pixels_sha256(rgb) == expected[name]["sha256"], f"{name}: not the pixels Detectron2 saw"
        assert list(rgb.shape[:2]) != expected[name]["resized_to"], f"{name}: DefaultPredictor keeps its size"
        Image.fromarray(rgb).save(tmp_path / name)
        paths.append(tmp_path / name)
    ours = predict(GOLDEN / variant, tmp_path / "ours.json", winograd=False, images=paths)
    total = compare_predictions(expected, ours)["total"]
    summary = {k: total[k] for k in ("reference", "ours", "matched", "fraction", "max_box_diff", "max_score_diff",
                                      "mean_mask_iou", "keypoint_fraction", "keypoint_max_diff")}
    print(variant, summary)
    assert total["reference"] >= 20, summary  # the golden data has real work in it
    assert total["fraction"] >= 0.95, summary
    first = next(iter(expected.values()))
    if "masks" in first:
        assert total["mean_mask_iou"] is not None and total["mean_mask_iou"] >= 0.97, summary
    if "keypoints" in first:
        assert total["keypoints_compared"], "no keypoints in our predictions"
        assert total["keypoint_fraction"] >= 0.95, summary
    for name, reference in expected.items():  # outputs in the input's pixels
        boxes = np.array(ours[name]["boxes"]).reshape(-1, 4)
        assert (boxes[:, 2] <= reference["width"] + 1e-3).all() and (boxes[:, 3] <= reference["height"] + 1e-3).all()
