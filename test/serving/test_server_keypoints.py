"""A Keypoint R-CNN served (issue 52): the golden Detectron2 keypoint model dir
(test/data/detectron2/keypoint_rcnn_R_50_FPN, written by Detectron2 itself) served by
`server --predictor model` answers every detection's "keypoints" ([x, y, score] per keypoint,
docs/contract.md) equal to what `trainer predict` writes for the same images, and a box-only
model answers neither keypoints nor masks. A JSON Lines body (batch transform) answers each
record's keypoints as the single image's answer has them."""
import base64
import json
import pathlib

import pytest
from served_model import ModelServer, predicted_detections

ROOT = pathlib.Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "test" / "data" / "detectron2"
IMAGES = sorted((GOLDEN / "images").glob("*.png"))[:2]


def served(model_dir: pathlib.Path, workdir: pathlib.Path, records=None, attributes=None):
    """Each image's detections answered to a request of its own; with `records` (a list), also
    each image's answer line to one JSON Lines request of all of them, appended to it."""
    with ModelServer(model_dir, workdir, "--precision", "fp32") as server:
        answers = server.detections(IMAGES, attributes)
        if records is not None:
            body = "\n".join(json.dumps({"image": base64.b64encode(path.read_bytes()).decode(), "id": path.name})
                             for path in IMAGES)
            status, text = server.invoke(body.encode(), "application/jsonlines")
            assert status == 200, text
            records.extend(json.loads(line) for line in text.split("\n"))
        return answers


def predicted(model_dir: pathlib.Path, workdir: pathlib.Path, *flags):
    return predicted_detections(model_dir, IMAGES, workdir / f"predict-{model_dir.name}.json", "--precision", "fp32",
                                *flags)


def test_a_keypoint_model_answers_the_keypoints_trainer_predict_writes(tmp_path):
    model = GOLDEN / "keypoint_rcnn_R_50_FPN"
    records = []
    got_images, want_images = served(model, tmp_path, records), predicted(model, tmp_path)
    assert [r["id"] for r in records] == [path.name for path in IMAGES]
    assert [r["detections"] for r in records] == got_images  # batch transform: the same answers
    for got_image, want_image in zip(got_images, want_images):
        assert len(got_image) == len(want_image) > 0
        for got, want in zip(got_image, want_image):
            assert got["score"] == pytest.approx(want["score"], abs=1e-6)
            points = got["keypoints"]
            assert len(points) == 17 and all(len(p) == 3 for p in points)
            flat = [v for p in points for v in p]
            assert flat == pytest.approx(want["keypoints"], abs=1e-3)


def test_a_box_only_model_answers_neither_keypoints_nor_masks(tmp_path):
    """Faster R-CNN (no mask head) under the default masks=true: boxes only (it once failed
    with a 500, the encoder taking the missing masks for a predictor bug)."""
    for image in served(GOLDEN / "faster_rcnn_R_50_FPN", tmp_path):
        assert image and all("keypoints" not in d and "mask" not in d for d in image)


def test_tiled_requests_carry_each_kept_detections_keypoints(tmp_path):
    """Tiles (issue 52): each detection the merge keeps brings the keypoints of the tile it came
    from, moved into the image (they once failed every tiled request with a 500): the server's
    tiled answer equals trainer predict's with the same tiles, every point in or at its box."""
    model = GOLDEN / "keypoint_rcnn_R_50_FPN"
    got_images = served(model, tmp_path, attributes="tile_size=224,tile_overlap=0.2")
    want_images = predicted(model, tmp_path, "--tile-size", "224", "--tile-overlap", "0.2")
    for got_image, want_image in zip(got_images, want_images):
        assert len(got_image) == len(want_image) > 0
        for got, want in zip(got_image, want_image):
            flat = [v for p in got["keypoints"] for v in p]
            assert len(flat) == 3 * 17 and flat == pytest.approx(want["keypoints"], abs=1e-3)
            x1, y1, x2, y2 = got["box"]
            for x, y, _ in got["keypoints"]:
                assert x1 - 1 <= x <= x2 and y1 - 1 <= y <= y2
