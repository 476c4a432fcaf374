"""scripts/containers/check_outputs.py close-detections, the arm64-vs-x86 serving comparison of
scripts/test-containers.sh: its RLE decoding equals pycocotools', detections pair by category
and box whatever their order, and each tolerance fails the check when exceeded. And
metric-regexes: every definition must match the log, but those named absent (a CPU job's
train:loss_scale), which must not."""
import copy
import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest
from pycocotools import mask as coco_mask

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "containers"))
import check_outputs  # noqa: E402


def rle(mask):
    encoded = coco_mask.encode(np.asfortranarray(mask.astype(np.uint8)))
    return {"size": [int(x) for x in encoded["size"]], "counts": encoded["counts"].decode()}


def test_rle_decoding_equals_pycocotools():
    rng = np.random.default_rng(3)
    for _ in range(100):
        h, w = rng.integers(1, 90, 2)
        mask = rng.random((h, w)) < rng.random()
        got = check_outputs.rle_area_mask(rle(mask))
        assert bytes(got) == bytes(mask.astype(np.uint8).flatten(order="F"))


def answer():
    def square(x0, y0, size):
        m = np.zeros((64, 64), bool)
        m[y0:y0 + size, x0:x0 + size] = True
        return rle(m)
    return {"width": 64, "height": 64, "detections": [
        {"box": [10.0, 10.0, 30.0, 30.0], "label": "square", "category_id": 1, "score": 0.91, "mask": square(10, 10, 20)},
        {"box": [40.0, 5.0, 60.0, 25.0], "label": "circle", "category_id": 2, "score": 0.90, "mask": square(40, 5, 20)},
        {"box": [5.0, 40.0, 25.0, 60.0], "label": "square", "category_id": 1, "score": 0.40, "mask": square(5, 40, 20)},
    ]}


def run(tmp_path, a, b):
    pa, pb = tmp_path / "a.json", tmp_path / "b.json"
    pa.write_text(json.dumps(a))
    pb.write_text(json.dumps(b))
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "containers" / "check_outputs.py"),
                           "close-detections", str(pa), str(pb)], capture_output=True, text=True)


def test_close_answers_pass_whatever_the_order(tmp_path):
    a, b = answer(), answer()
    b["detections"].reverse()  # two near-equal scores may come out in either order
    b["detections"][0]["score"] += 1e-3
    b["detections"][1]["box"][2] += 0.25
    r = run(tmp_path, a, b)
    assert r.returncode == 0, r.stderr
    assert "3 detections paired" in r.stdout and "largest score difference 1.0e-03" in r.stdout


@pytest.mark.parametrize("change, message", [
    (lambda d: d["detections"][0].update(score=0.9) or d, "score differs by 1.00e-02"),
    (lambda d: d["detections"][1]["box"].__setitem__(0, 41.0) or d, "box by 1.000 px"),
    (lambda d: d["detections"][1].update(category_id=3, label="triangle") or d, "(circle, score 0.9000) has no partner left"),
    (lambda d: d["detections"].pop() and d, "has 3 detections"),
    (lambda d: d.update(width=65) or d, "the answers are for 64x64 and 65x64"),
])
def test_each_difference_beyond_its_tolerance_fails(tmp_path, change, message):
    a, b = answer(), change(copy.deepcopy(answer()))
    r = run(tmp_path, a, b)
    assert r.returncode == 1 and message in r.stderr, r.stderr


def test_a_mask_that_moved_fails_on_its_iou(tmp_path):
    a, b = answer(), answer()
    m = np.zeros((64, 64), bool)
    m[10:30, 11:31] = True  # one column over: IoU 380/420
    b["detections"][0]["mask"] = rle(m)
    r = run(tmp_path, a, b)
    assert r.returncode == 1 and "mask IoU 0.9048 (floor 0.98)" in r.stderr


def write_metric_inputs(tmp_path, lines):
    log = tmp_path / "train.log"
    log.write_text("\n".join(lines) + "\n")
    defs = tmp_path / "defs.json"
    defs.write_text(json.dumps([
        {"Name": "train:lr", "Regex": r"\[train\] .*\blr: ([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"},
        {"Name": "train:loss_scale", "Regex": r"\[train\] .*\bloss_scale: ([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"},
    ]))
    return str(log), str(defs)


def test_metric_regexes_every_definition_must_match(tmp_path, capsys):
    log, defs = write_metric_inputs(tmp_path, ["[train] iter: 1/2  lr: 0.01  loss_scale: 65536"])
    check_outputs.metric_regexes(log, defs)
    assert "all 2 metric regexes match" in capsys.readouterr().out
    log, defs = write_metric_inputs(tmp_path, ["[train] iter: 1/2  lr: 0.01"])
    with pytest.raises(SystemExit):
        check_outputs.metric_regexes(log, defs)
    assert "train:loss_scale" in capsys.readouterr().err


def test_metric_regexes_named_absent_metrics_must_not_match(tmp_path, capsys):
    # A job without fp16 loss scaling: its log has no loss_scale, and must not have one.
    log, defs = write_metric_inputs(tmp_path, ["[train] iter: 1/2  lr: 0.01"])
    check_outputs.metric_regexes(log, defs, "train:loss_scale")
    assert "train:loss_scale absent" in capsys.readouterr().out
    log, defs = write_metric_inputs(tmp_path, ["[train] iter: 1/2  lr: 0.01  loss_scale: 65536"])
    with pytest.raises(SystemExit):
        check_outputs.metric_regexes(log, defs, "train:loss_scale")
    assert "should not appear" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        check_outputs.metric_regexes(log, defs, "train:no_such_metric")
    assert "defines no metric train:no_such_metric" in capsys.readouterr().err
