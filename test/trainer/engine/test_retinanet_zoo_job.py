"""RetinaNet by its zoo name through every entry point (issue 52): `entrypoint train` with
config-file COCO-Detection/retinanet_R_50_FPN_3x.yaml fine-tunes the golden RetinaNet
(test/data/detectron2/retinanet_R_50_FPN, written by Detectron2 itself) from the weights
channel for a few iterations on the shapes data, at that variant's narrow widths; every
Detectron2 tensor loads but the class layer (5 classes there, 3 here); the metrics carry
Detectron2's loss names loss_cls and loss_box_reg (no RPN, box-head or mask losses) and a
bbox-only evaluation; then `trainer predict` on the model it wrote detects, and `server`
answers /invocations with the same detections."""
import json
import math
import os
import pathlib
import shutil
import signal
import subprocess

import pytest
from engine_test_job import entrypoint_env, log_path, make_shapes, start_entrypoint
from served_model import assert_same_images, predicted_detections, served_detections

REPO = pathlib.Path(__file__).resolve().parents[3]
GOLDEN = REPO / "test" / "data" / "detectron2" / "retinanet_R_50_FPN"

# A low threshold, so that a model fine-tuned for four iterations (its class layer new, at
# PRIOR_PROB 0.01) has detections to compare.
SCORE_THRESHOLD = 0.001


def narrow_opts() -> list:
    """The golden variant's narrow widths as opts (its classes are 5; the shapes have 3)."""
    overrides = json.loads((GOLDEN / "info.json").read_text())["overrides"]
    return [f"{k} {v}" for k, v in overrides.items() if k.startswith(("MODEL.RESNETS.", "MODEL.FPN."))]


SMALL_RUN = ["MODEL.RETINANET.NUM_CLASSES 3", "MODEL.DEVICE cpu", "SOLVER.IMS_PER_BATCH 2", "SOLVER.BASE_LR 0.0005",
             "SOLVER.WARMUP_ITERS 2", "SOLVER.CHECKPOINT_PERIOD 100", "SOLVER.LOG_PERIOD 1",
             "INPUT.MIN_SIZE_TRAIN [64] INPUT.MAX_SIZE_TRAIN 64 INPUT.MIN_SIZE_TEST 64 INPUT.MAX_SIZE_TEST 64",
             "DATALOADER.NUM_WORKERS 1", "TENSORBOARD.EVAL_IMAGES 0", "SEED 5"]


def wait_or_kill(proc: subprocess.Popen, timeout: float) -> int:
    """The job's exit code; a job that overruns is killed (its whole session) and fails the test."""
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        pytest.fail(f"the job did not finish in {timeout} s")


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """The job tree of one finished `entrypoint train` run and its log."""
    root = tmp_path_factory.mktemp("retinanet_job")
    shapes = make_shapes(root / "shapes", train=8, val=4, seed=11)
    (root / "input" / "config").mkdir(parents=True)
    (root / "input" / "data" / "weights").mkdir(parents=True)
    for channel in ("train", "val"):
        (root / "input" / "data" / channel).symlink_to(shapes)
    (root / "input" / "data" / "weights" / "model_final.pth").write_bytes((GOLDEN / "model_final.pth").read_bytes())
    opts = " ".join(["SOLVER.MAX_ITER 4", *narrow_opts(), *SMALL_RUN])
    (root / "input" / "config" / "hyperparameters.json").write_text(json.dumps({
        "config-file": "COCO-Detection/retinanet_R_50_FPN_3x.yaml", "opts": opts}))
    proc = start_entrypoint(root, "--master-port", "29596", env=entrypoint_env())
    code = wait_or_kill(proc, 600)
    out = log_path(root).read_text()
    assert code == 0, out[-4000:]
    return root, shapes, out


def test_retinanet_trains_by_its_zoo_name_with_detectron2_loss_names(trained):
    root, _, out = trained
    assert "[train] iter: 4/4" in out, out[-2000:]
    # Detectron2's checkpoint loads into the 3-class model: all of it but the class layer.
    loaded = [line for line in out.splitlines() if line.startswith("[weights] loaded")]
    assert len(loaded) == 1 and "model_final.pth" in loaded[0], out[-3000:]
    assert "2 skipped for their shape, 0 keys of the file unmatched, 0 dropped on purpose" in loaded[0], loaded
    skipped = sorted(line.split()[2] for line in out.splitlines() if line.startswith("[weights] skipped"))
    assert skipped == ["head.cls_score.bias:", "head.cls_score.weight:"], skipped
    records = [json.loads(line) for line in (root / "output" / "data" / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in records if "total_loss" in r]
    assert len(steps) == 4, records[-3:]
    for r in steps:
        assert math.isfinite(r["loss_cls"]) and r["loss_cls"] > 0, r
        assert math.isfinite(r["loss_box_reg"]) and r["loss_box_reg"] >= 0, r
        for name in ("loss_objectness", "loss_rpn_box_reg", "loss_classifier", "loss_box_reg_stage0", "loss_mask"):
            assert name not in r, r
    evaluations = [r for r in records if "total_loss" not in r]
    assert evaluations, records[-3:]
    text = json.dumps(evaluations)
    assert "bbox" in text and "segm" not in text, text[:2000]
    config = (root / "model" / "config.yaml").read_text()
    assert 'META_ARCHITECTURE: "RetinaNet"' in config and "build_retinanet_resnet_fpn_backbone" in config, config
    assert "MASK_ON: false" in config


def test_the_retinanet_it_wrote_predicts_and_serves_the_same_detections(trained, tmp_path):
    root, shapes, _ = trained
    model = root / "model"
    images = sorted((shapes / "val").glob("*.png"))[:2]
    expected = predicted_detections(model, images, tmp_path / "pred.json", "--score-threshold", str(SCORE_THRESHOLD))
    for want in (want for want_image in expected for want in want_image):
        assert want["category_id"] in (1, 2, 3)
        assert "segmentation" not in want  # boxes only
        x, y, w, h = want["bbox"]
        assert w > 0 and h > 0 and x >= 0 and y >= 0 and x + w <= 64 + 1e-3 and y + h <= 64 + 1e-3
    answers = served_detections(model, images, tmp_path, attributes=f"score_threshold={SCORE_THRESHOLD}")
    assert_same_images(answers, expected)


def test_a_class_count_that_is_not_the_datasets_names_the_retinanet_key(tmp_path):
    """RetinaNet's classes are MODEL.RETINANET.NUM_CLASSES (ROI_HEADS.NUM_CLASSES is not
    read): the job's refusal of the zoo's 80 on a 3-class dataset names that key."""
    shapes = make_shapes(tmp_path / "shapes", train=2, val=1, seed=3)
    root = tmp_path / "job"
    (root / "input" / "config").mkdir(parents=True)
    (root / "input" / "data").mkdir(parents=True)
    (root / "input" / "data" / "train").symlink_to(shapes)
    opts = " ".join(['MODEL.WEIGHTS ""', "SOLVER.MAX_ITER 1", *narrow_opts(), *SMALL_RUN[1:]])
    (root / "input" / "config" / "hyperparameters.json").write_text(json.dumps({
        "config-file": "COCO-Detection/retinanet_R_50_FPN_1x.yaml", "opts": opts}))
    proc = start_entrypoint(root, "--master-port", "29597", env=entrypoint_env())
    assert wait_or_kill(proc, 120) != 0
    failure = (root / "output" / "failure").read_text()
    assert "MODEL.RETINANET.NUM_CLASSES" in failure and "3 categories" in failure, failure


def test_the_retinanet_job_resumes_from_its_checkpoint(trained, tmp_path):
    """Checkpoints hold the whole one-stage model: the finished job (a copy, so the other
    tests' model stays as trained) run again with resume and more iterations continues from
    iteration 4 and logs RetinaNet's losses for the rest."""
    root = tmp_path / "job"
    shutil.copytree(trained[0], root, symlinks=True)
    hyperparameters = json.loads((root / "input" / "config" / "hyperparameters.json").read_text())
    hyperparameters.update({"resume": "True", "opts": hyperparameters["opts"].replace("SOLVER.MAX_ITER 4",
                                                                                        "SOLVER.MAX_ITER 6")})
    (root / "input" / "config" / "hyperparameters.json").write_text(json.dumps(hyperparameters))
    proc = start_entrypoint(root, "--master-port", "29598", env=entrypoint_env())
    assert wait_or_kill(proc, 600) == 0, log_path(root).read_text()[-4000:]
    log = log_path(root).read_text()
    assert f"resumed from {root / 'checkpoints' / 'checkpoint_00000004.safetensors'} at iteration 4" in log, log[-3000:]
    assert "[train] iter: 5/6" in log and "[train] iter: 6/6" in log, log[-3000:]
    assert "[train] iter: 1/6" not in log
    steps = [json.loads(line) for line in (root / "output" / "data" / "metrics.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in steps if "loss_cls" in r][-2:] == [5, 6], steps[-3:]
