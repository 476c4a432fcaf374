"""`trainer make-shapes --keypoints` (issue 52): every shape's outline extremes (left, top,
right, bottom) as COCO keypoints for the Keypoint R-CNN demo. Checked against the pixels and
the masks: each labelled point lies in its box on its shape's outermost pixels in that
direction, visible points (v = 2) touch the shape's own mask (pycocotools decodes it; within
two pixels), and
the dataset without the flag is byte for byte what it was."""
import hashlib
import json
import os
import pathlib
import subprocess

import numpy as np
from pycocotools import mask as mask_utils

REPO = pathlib.Path(__file__).resolve().parents[3]
TRAINER = pathlib.Path(os.environ.get("MRCNN_BUILD_DIR", REPO / "build")) / "bin" / "trainer"


def make(out, *flags):
    done = subprocess.run([str(TRAINER), "make-shapes", "--output", str(out), "--train", "30", "--val", "5",
                           "--size", "128", "--seed", "4", *flags], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return json.loads((out / "annotations" / "instances_train.json").read_text())


def test_shapes_carry_their_extreme_points_as_keypoints(tmp_path):
    coco = make(tmp_path / "k", "--keypoints")
    for category in coco["categories"]:
        assert category["keypoints"] == ["left", "top", "right", "bottom"]
        assert category["skeleton"] == [[1, 2], [2, 3], [3, 4], [4, 1]]
    visible = hidden = 0
    for a in coco["annotations"]:
        points = np.asarray(a["keypoints"], dtype=np.float64).reshape(4, 3)
        assert a["num_keypoints"] == int((points[:, 2] > 0).sum())
        assert set(points[:, 2]) <= {0, 1, 2}
        x, y, w, h = a["bbox"]
        labelled = points[points[:, 2] > 0]
        # Within the box: on the centres of its outermost pixels at most.
        assert (labelled[:, 0] >= x - 1e-6).all() and (labelled[:, 0] <= x + w - 1 + 1e-6).all(), a
        assert (labelled[:, 1] >= y - 1e-6).all() and (labelled[:, 1] <= y + h - 1 + 1e-6).all(), a
        left, top, right, bottom = points
        # The extremes order themselves as their names say.
        for p, q in ((left, right), (top, bottom)):
            if p[2] > 0 and q[2] > 0:
                axis = 0 if p is left else 1
                assert p[axis] <= q[axis], a
        mask = mask_utils.decode(mask_utils.frPyObjects(a["segmentation"], 128, 128)).max(axis=2)
        for px, py, v in points:
            if v != 2:
                hidden += v == 1
                continue
            visible += 1
            ix, iy = int(round(px)), int(round(py))
            # Two pixels of slack: an occluded shape's mask comes from its visible pixels'
            # contours, which may give up a boundary pixel the drawn shape owns.
            window = mask[max(0, iy - 2):iy + 3, max(0, ix - 2):ix + 3]
            assert window.any(), (a["id"], px, py)
    assert visible > 20 * 4 and hidden >= 0


def test_without_the_flag_the_dataset_is_unchanged(tmp_path):
    plain = make(tmp_path / "p")
    with_keypoints = make(tmp_path / "k", "--keypoints")
    assert all("keypoints" not in a for a in plain["annotations"])
    assert all("keypoints" not in c for c in plain["categories"])
    for a in with_keypoints["annotations"]:
        del a["keypoints"], a["num_keypoints"]
    for c in with_keypoints["categories"]:
        del c["keypoints"], c["skeleton"]
    assert with_keypoints == plain
    for image in sorted((tmp_path / "p" / "train").iterdir()):
        same = tmp_path / "k" / "train" / image.name
        assert hashlib.sha256(image.read_bytes()).digest() == hashlib.sha256(same.read_bytes()).digest()


def test_keypoints_follow_the_seed(tmp_path):
    """Deterministic like the rest of the dataset: the same seed gives the same keypoints
    file byte for byte, another seed other keypoints."""
    make(tmp_path / "a", "--keypoints")
    make(tmp_path / "b", "--keypoints")
    files = [tmp_path / run / "annotations" / "instances_train.json" for run in ("a", "b")]
    assert files[0].read_bytes() == files[1].read_bytes()
    other = tmp_path / "c"
    done = subprocess.run([str(TRAINER), "make-shapes", "--output", str(other), "--train", "30", "--val", "5",
                           "--size", "128", "--seed", "5", "--keypoints"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    points = [json.loads(f.read_text())["annotations"][0]["keypoints"]
              for f in (files[0], other / "annotations" / "instances_train.json")]
    assert points[0] != points[1]
