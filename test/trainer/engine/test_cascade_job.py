"""Cascade Mask R-CNN through its entry points (issue 52): the zoo's
Misc/cascade_mask_rcnn_R_50_FPN_3x by its name through `entrypoint train`, fine-tuned from a
Detectron2 Cascade checkpoint in the weights channel (the golden cascade variant's, narrow
widths, 5 classes onto the shapes' 3); its per-stage losses in the metrics under Detectron2's
names; and the model it writes predicting (`trainer predict`) and serving (/invocations) the
same detections. The network is the zoo's with the golden variant's narrow widths, so a CPU
runs it in seconds."""
import json
import pathlib
import shutil

import pytest
from engine_test_job import entrypoint_env, log_path, make_shapes, start_entrypoint
from served_model import assert_same_images, predicted_detections, served_detections

REPO = pathlib.Path(__file__).resolve().parents[3]
GOLDEN = REPO / "test" / "data" / "detectron2" / "cascade_mask_rcnn_R_50_FPN"
STAGE_LOSSES = [f"{name}_stage{s}" for s in range(3) for name in ("loss_cls", "loss_box_reg")]

SMALL_RUN = ["MODEL.ROI_HEADS.NUM_CLASSES 3", "MODEL.DEVICE cpu", "SOLVER.IMS_PER_BATCH 2", "SOLVER.BASE_LR 0.0005",
             "SOLVER.WARMUP_ITERS 2", "SOLVER.CHECKPOINT_PERIOD 100", "SOLVER.LOG_PERIOD 1",
             "MODEL.RPN.POST_NMS_TOPK_TRAIN 100", "MODEL.RPN.PRE_NMS_TOPK_TRAIN 400",
             "MODEL.ROI_HEADS.BATCH_SIZE_PER_IMAGE 32",
             "INPUT.MIN_SIZE_TRAIN [64] INPUT.MAX_SIZE_TRAIN 64 INPUT.MIN_SIZE_TEST 64 INPUT.MAX_SIZE_TEST 64",
             "DATALOADER.NUM_WORKERS 1", "TENSORBOARD.EVAL_IMAGES 0", "SEED 5"]


def narrow_opts() -> list:
    overrides = json.loads((GOLDEN / "info.json").read_text())["overrides"]
    keep = ("MODEL.RESNETS.", "MODEL.FPN.", "MODEL.ROI_BOX_HEAD.", "MODEL.ROI_MASK_HEAD.")
    return [f"{k} {json.dumps(v)}" for k, v in overrides.items() if k.startswith(keep)]


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    return make_shapes(tmp_path_factory.mktemp("shapes"), train=8, val=4, seed=11)


def test_the_zoo_cascade_mask_rcnn_fine_tunes_predicts_and_serves(shapes, tmp_path):
    root = tmp_path / "job"
    (root / "input" / "config").mkdir(parents=True)
    (root / "input" / "data" / "weights").mkdir(parents=True)
    for channel in ("train", "val"):
        (root / "input" / "data" / channel).symlink_to(shapes)
    shutil.copy(GOLDEN / "model_final.pth", root / "input" / "data" / "weights" / "model_final.pth")
    opts = " ".join(["SOLVER.MAX_ITER 6", *narrow_opts(), *SMALL_RUN])
    (root / "input" / "config" / "hyperparameters.json").write_text(json.dumps({
        "config-file": "Misc/cascade_mask_rcnn_R_50_FPN_3x.yaml", "opts": opts}))
    proc = start_entrypoint(root, "--master-port", "29575", env=entrypoint_env())
    code = proc.wait(timeout=600)
    out = log_path(root).read_text()
    assert code == 0, out[-4000:]
    assert "[train] iter: 6/6" in out, out[-2000:]
    # Every stage's box head and class-agnostic box regression load from Detectron2's file;
    # only the class layers (5 classes there, 3 here) are skipped.
    assert "[weights] loaded" in out
    for stage in range(3):
        assert f"roi_heads.box_head.{stage}.fc1.weight" not in out
        assert f"roi_heads.box_predictor.{stage}.bbox_pred.weight" not in out
        assert f"roi_heads.box_predictor.{stage}.cls_score.weight" in out  # skipped, with its shapes
    records = [json.loads(line) for line in (root / "output" / "data" / "metrics.jsonl").read_text().splitlines()]
    losses = [r for r in records if "total_loss" in r]
    assert losses, records[-3:]
    for record in losses:
        assert all(name in record for name in STAGE_LOSSES + ["loss_mask"]), record
        assert "loss_classifier" not in record and "loss_box_reg" not in record, record
    evaluations = json.dumps([r for r in records if "total_loss" not in r])
    assert "bbox" in evaluations and "segm" in evaluations, evaluations[:2000]

    model = root / "model"
    assert "CascadeROIHeads" in (model / "config.yaml").read_text()
    images = sorted((shapes / "val").glob("*.png"))[:2]
    expected = predicted_detections(model, images, tmp_path / "pred.json")
    assert all(expected), "trainer predict found nothing on an image"
    assert all("segmentation" in want for want_image in expected for want in want_image)
    assert_same_images(served_detections(model, images, tmp_path), expected)
