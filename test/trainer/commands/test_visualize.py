"""`trainer visualize` draws the server's answer: mask pixels are tinted, the box outline is
drawn, pixels away from any detection are untouched, and bad inputs are refused."""
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from pycocotools import mask as mask_api

BUILD = Path(os.environ.get("MRCNN_BUILD_DIR", Path(__file__).resolve().parents[3] / "build"))
TRAINER = BUILD / "bin" / "trainer"


def _answer(mask: np.ndarray, box, score=0.9):
    rle = mask_api.encode(np.asfortranarray(mask.astype(np.uint8)))
    return {"height": mask.shape[0], "width": mask.shape[1],
            "detections": [{"box": box, "label": "square", "category_id": 2, "score": score,
                            "mask": {"size": rle["size"], "counts": rle["counts"].decode()}}]}


def _run(*args):
    return subprocess.run([str(TRAINER), "visualize", *map(str, args)], capture_output=True, text=True)


@pytest.fixture
def scene(tmp_path):
    image = np.full((64, 96, 3), 40, np.uint8)
    image[20:40, 30:60] = (200, 200, 200)
    Image.fromarray(image).save(tmp_path / "in.png")
    mask = np.zeros((64, 96), np.uint8)
    mask[20:40, 30:60] = 1
    return tmp_path, image, mask


def test_masks_and_boxes_are_drawn_and_the_rest_is_untouched(scene):
    tmp, image, mask = scene
    (tmp / "det.json").write_text(json.dumps(_answer(mask, [30, 20, 59, 39])))
    run = _run("--image", tmp / "in.png", "--detections", tmp / "det.json", "--output", tmp / "out.png")
    assert run.returncode == 0, run.stderr
    out = np.asarray(Image.open(tmp / "out.png").convert("RGB"))
    assert out.shape == image.shape
    inside = out[25:35, 35:55].reshape(-1, 3)
    assert np.all(np.any(inside != (200, 200, 200), axis=1)), "mask pixels must be tinted"
    assert np.any(out[30, 30] != image[30, 30]), "box outline must be drawn"
    np.testing.assert_array_equal(out[50:, 70:], image[50:, 70:])


def test_score_threshold_skips_weak_detections(scene):
    tmp, image, mask = scene
    (tmp / "det.json").write_text(json.dumps(_answer(mask, [30, 20, 59, 39], score=0.2)))
    run = _run("--image", tmp / "in.png", "--detections", tmp / "det.json", "--output", tmp / "out.png",
               "--score-threshold", "0.5")
    assert run.returncode == 0, run.stderr
    np.testing.assert_array_equal(np.asarray(Image.open(tmp / "out.png").convert("RGB")), image)


def test_mask_of_another_size_is_an_error(scene):
    tmp, _, _ = scene
    (tmp / "det.json").write_text(json.dumps(_answer(np.zeros((10, 10), np.uint8), [0, 0, 5, 5])))
    run = _run("--image", tmp / "in.png", "--detections", tmp / "det.json", "--output", tmp / "out.png")
    assert run.returncode != 0
    assert "does not match the image" in run.stderr


def test_not_json_names_the_file(scene):
    tmp, _, _ = scene
    (tmp / "det.json").write_text("{nope")
    run = _run("--image", tmp / "in.png", "--detections", tmp / "det.json", "--output", tmp / "out.png")
    assert run.returncode != 0
    assert "det.json" in run.stderr and "not JSON" in run.stderr


@pytest.mark.parametrize("form", ["server", "coco"])
def test_keypoints_are_drawn_where_they_score(scene, form):
    """Keypoints (issue 52) as dots at their pixels, the server's [[x, y, s], ...] or a COCO
    result's flat list; one scoring below 0.05 is left out."""
    tmp, image, mask = scene
    points = [[10, 10, 0.9], [80, 50, 0.6], [50, 8, 0.01]]
    if form == "server":
        answer = {"height": 64, "width": 96,
                  "detections": [{"box": [5, 5, 90, 60], "label": "p", "category_id": 1, "score": 0.9,
                                  "keypoints": points}]}
    else:
        answer = [{"image_id": 1, "category_id": 1, "bbox": [5, 5, 85, 55], "score": 0.9,
                   "keypoints": [v for p in points for v in p]}]
    (tmp / "det.json").write_text(json.dumps(answer))
    run = _run("--image", tmp / "in.png", "--detections", tmp / "det.json", "--output", tmp / "out.png")
    assert run.returncode == 0, run.stderr
    out = np.asarray(Image.open(tmp / "out.png").convert("RGB"))
    assert np.any(out[10, 10] != image[10, 10]) and np.any(out[50, 80] != image[50, 80])
    np.testing.assert_array_equal(out[7:10, 48:53], image[7:10, 48:53])  # the low-scoring one


def _keypoint_scene(tmp, skeleton, points=((10, 50, 0.9), (80, 50, 0.9), (45, 8, 0.01))):
    """A server answer with three keypoints (the third scoring under 0.05) and --annotations
    whose category names them and joins them by `skeleton`."""
    (tmp / "det.json").write_text(json.dumps({
        "height": 64, "width": 96,
        "detections": [{"box": [5, 5, 90, 60], "label": "p", "category_id": 1, "score": 0.9,
                        "keypoints": [list(p) for p in points]}]}))
    (tmp / "ann.json").write_text(json.dumps({
        "images": [], "annotations": [],
        "categories": [{"id": 1, "name": "p", "keypoints": ["a", "b", "c"], "skeleton": skeleton}]}))


def test_the_skeleton_from_annotations_joins_drawn_keypoints(scene):
    """--annotations gives the category's skeleton: a line joins two drawn keypoints, none
    reaches the one scoring under 0.05, and without --annotations no line is drawn."""
    tmp, image, _ = scene
    _keypoint_scene(tmp, [[1, 2], [2, 3]])
    args = ["--image", tmp / "in.png", "--detections", tmp / "det.json"]
    run = _run(*args, "--output", tmp / "joined.png", "--annotations", tmp / "ann.json")
    assert run.returncode == 0, run.stderr
    joined = np.asarray(Image.open(tmp / "joined.png").convert("RGB"))
    assert np.any(joined[50, 45] != image[50, 45]), "the line from keypoint 1 to 2"
    assert np.any(joined[50, 25] != image[50, 25])
    np.testing.assert_array_equal(joined[28:31, 61:64], image[28:31, 61:64])  # 2 -> 3: 3 not drawn
    run = _run(*args, "--output", tmp / "dots.png")
    assert run.returncode == 0, run.stderr
    dots = np.asarray(Image.open(tmp / "dots.png").convert("RGB"))
    np.testing.assert_array_equal(dots[50, 20:70], image[50, 20:70])
    assert np.any(dots[50, 10] != image[50, 10])


def test_a_skeleton_naming_a_missing_keypoint_is_an_error(scene):
    tmp, _, _ = scene
    _keypoint_scene(tmp, [[1, 4]])
    run = _run("--image", tmp / "in.png", "--detections", tmp / "det.json", "--output", tmp / "out.png",
               "--annotations", tmp / "ann.json")
    assert run.returncode != 0
    assert "ann.json" in run.stderr and '"skeleton" pair [1, 4]' in run.stderr


def test_keypoints_that_are_not_the_categorys_are_an_error(scene):
    tmp, _, _ = scene
    _keypoint_scene(tmp, [[1, 2]], points=((10, 50, 0.9), (80, 50, 0.9)))
    run = _run("--image", tmp / "in.png", "--detections", tmp / "det.json", "--output", tmp / "out.png",
               "--annotations", tmp / "ann.json")
    assert run.returncode != 0
    assert "det.json" in run.stderr and "has 2 keypoints" in run.stderr and "names 3" in run.stderr


@pytest.mark.parametrize("keypoints", [[10, 10, 0.9, 20], [[10, 10]], [[10, "x", 0.5]], {"x": 1}])
def test_malformed_keypoints_name_the_file(scene, keypoints):
    tmp, _, _ = scene
    (tmp / "det.json").write_text(json.dumps({
        "height": 64, "width": 96,
        "detections": [{"box": [5, 5, 90, 60], "label": "p", "score": 0.9, "keypoints": keypoints}]}))
    run = _run("--image", tmp / "in.png", "--detections", tmp / "det.json", "--output", tmp / "out.png")
    assert run.returncode != 0
    assert "det.json" in run.stderr and '"keypoints" must be' in run.stderr
