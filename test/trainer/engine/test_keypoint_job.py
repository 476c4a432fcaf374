"""Keypoint R-CNN through `entrypoint train` (issue 52): the zoo's
COCO-Keypoints/keypoint_rcnn_R_50_FPN_3x by its name, fine-tuned from a Detectron2 checkpoint
in the weights channel (the golden keypoint variant's, narrow widths) on shapes whose boxes'
corners are their keypoints; its loss_keypoint in the metrics, its evaluation on keypoints (OKS),
and the model it writes predicting keypoints. The network is the zoo's with the golden
variant's narrow widths, so a CPU runs it in seconds."""
import json
import pathlib
import shutil
import subprocess

import pytest
from engine_test_job import TRAINER, entrypoint_env, log_path, make_shapes, start_entrypoint

REPO = pathlib.Path(__file__).resolve().parents[3]
GOLDEN = REPO / "test" / "data" / "detectron2" / "keypoint_rcnn_R_50_FPN"
CORNERS = ["left_top", "right_top", "right_bottom", "left_bottom"]


def with_corner_keypoints(shapes: pathlib.Path, out: pathlib.Path) -> pathlib.Path:
    """The shapes dataset with each box's corners as its 4 keypoints (COCO pixel indices,
    visible) and the categories naming them, so a flip swaps left and right."""
    shutil.copytree(shapes, out, symlinks=True)
    for annotations in (out / "annotations").glob("*.json"):
        coco = json.loads(annotations.read_text())
        for c in coco["categories"]:
            c["keypoints"] = CORNERS
            c["skeleton"] = [[1, 2], [2, 3], [3, 4], [4, 1]]
        for a in coco["annotations"]:
            x, y, w, h = a["bbox"]
            right, bottom = max(x, x + w - 1), max(y, y + h - 1)
            a["keypoints"] = [x, y, 2, right, y, 2, right, bottom, 2, x, bottom, 2]
            a["num_keypoints"] = 4
        annotations.write_text(json.dumps(coco))
    return out


def narrow_opts() -> list:
    overrides = json.loads((GOLDEN / "info.json").read_text())["overrides"]
    keep = ("MODEL.RESNETS.", "MODEL.FPN.", "MODEL.ROI_BOX_HEAD.", "MODEL.ROI_KEYPOINT_HEAD.")
    return [f"{k} {json.dumps(v)}" for k, v in overrides.items() if k.startswith(keep)]


SMALL_RUN = ["MODEL.ROI_HEADS.NUM_CLASSES 3", "MODEL.ROI_KEYPOINT_HEAD.NUM_KEYPOINTS 4", "MODEL.DEVICE cpu",
             "SOLVER.IMS_PER_BATCH 2", "SOLVER.BASE_LR 0.0005", "SOLVER.WARMUP_ITERS 2",
             "SOLVER.CHECKPOINT_PERIOD 100", "SOLVER.LOG_PERIOD 1", "MODEL.RPN.POST_NMS_TOPK_TRAIN 100",
             "MODEL.RPN.PRE_NMS_TOPK_TRAIN 400", "MODEL.ROI_HEADS.BATCH_SIZE_PER_IMAGE 32",
             "INPUT.MIN_SIZE_TRAIN [64] INPUT.MAX_SIZE_TRAIN 64 INPUT.MIN_SIZE_TEST 64 INPUT.MAX_SIZE_TEST 64",
             "TEST.KEYPOINT_OKS_SIGMAS [0.05, 0.05, 0.05, 0.05]",
             "DATALOADER.NUM_WORKERS 1", "TENSORBOARD.EVAL_IMAGES 0", "SEED 5"]


@pytest.fixture(scope="module")
def keypoint_shapes(tmp_path_factory):
    shapes = make_shapes(tmp_path_factory.mktemp("shapes"), train=8, val=4, seed=11)
    return with_corner_keypoints(shapes, tmp_path_factory.mktemp("keypoint_shapes") / "data")


def test_the_zoo_keypoint_rcnn_fine_tunes_evaluates_keypoints_and_predicts_them(keypoint_shapes, tmp_path):
    root = tmp_path / "job"
    (root / "input" / "config").mkdir(parents=True)
    (root / "input" / "data" / "weights").mkdir(parents=True)
    for channel in ("train", "val"):
        (root / "input" / "data" / channel).symlink_to(keypoint_shapes)
    shutil.copy(GOLDEN / "model_final.pth", root / "input" / "data" / "weights" / "model_final.pth")
    opts = " ".join(["SOLVER.MAX_ITER 6", *narrow_opts(), *SMALL_RUN])
    (root / "input" / "config" / "hyperparameters.json").write_text(json.dumps({
        "config-file": "COCO-Keypoints/keypoint_rcnn_R_50_FPN_3x.yaml", "opts": opts}))
    proc = start_entrypoint(root, "--master-port", "29573", env=entrypoint_env())
    code = proc.wait(timeout=600)
    out = log_path(root).read_text()
    assert code == 0, out[-4000:]
    # Detectron2's keypoint head loads but for its 17-keypoint predictor (ours predicts 4).
    assert "roi_heads.keypoint_head.conv_fcn1.weight" not in out  # loaded, not skipped
    assert "roi_heads.keypoint_head.score_lowres.weight" in out  # skipped, with its shapes
    records = [json.loads(line) for line in (root / "output" / "data" / "metrics.jsonl").read_text().splitlines()]
    losses = [r for r in records if "total_loss" in r]
    assert losses and all("loss_keypoint" in r and "loss_mask" not in r for r in losses), losses[-1]
    evaluations = json.dumps([r for r in records if "total_loss" not in r])
    assert "keypoints" in evaluations and "segm" not in evaluations, evaluations[:2000]
    model = root / "model"
    assert "KEYPOINT_ON: true" in (model / "config.yaml").read_text()
    image = sorted((keypoint_shapes / "val").glob("*.png"))[0]
    predicted = subprocess.run([str(TRAINER), "predict", "--model-dir", str(model), "--images", str(image),
                                "--output", str(tmp_path / "pred.json"), "--score-threshold", "0.0",
                                "--precision", "fp32"], capture_output=True, text=True, timeout=300)
    assert predicted.returncode == 0, predicted.stderr[-3000:]
    results = json.loads((tmp_path / "pred.json").read_text())
    assert results, "no detections at score 0"
    for r in results:
        assert len(r["keypoints"]) == 3 * 4
        x, y, w, h = r["bbox"]
        xs, ys = r["keypoints"][0::3], r["keypoints"][1::3]
        # Inside the box (pixel indices: the box's continuous edges minus the half pixel).
        assert min(xs) >= x - 0.5 - 1e-3 and max(xs) <= x + w + 1e-3
        assert min(ys) >= y - 0.5 - 1e-3 and max(ys) <= y + h + 1e-3
