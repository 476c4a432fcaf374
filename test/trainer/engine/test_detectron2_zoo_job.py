"""detectron2-sagemaker's jobs through `entrypoint train` (issue 51): the README's own
example (R101-C4 by its zoo name, "resume": "True" on a first run) fine-tuning from a zoo
.pkl in the weights channel, the model it writes predicting and serving; a zoo config whose
weights are neither in the channel nor reachable failing at once with output/failure naming them; and a
box-only COCO file training a Faster R-CNN whose evaluation is bbox only. The networks are
the zoo's (depth, stages, heads) with the narrow widths of test/data/detectron2's golden
variants, so a CPU runs them in seconds."""
import json
import pathlib
import pickle
import shutil
import socket
import subprocess
import time

import pytest
import torch
from engine_test_job import TRAINER, entrypoint_env, finish, log_path, make_shapes, start_entrypoint

REPO = pathlib.Path(__file__).resolve().parents[3]
GOLDEN = REPO / "test" / "data" / "detectron2"


def narrow_opts(variant: str) -> list:
    """The golden variant's narrow widths as opts (its classes are 5; the shapes have 3)."""
    overrides = json.loads((GOLDEN / variant / "info.json").read_text())["overrides"]
    return [f"{k} {v}" for k, v in overrides.items()
            if k.startswith(("MODEL.RESNETS.", "MODEL.FPN.", "MODEL.ROI_BOX_HEAD.", "MODEL.ROI_MASK_HEAD."))]


SMALL_RUN = ["MODEL.ROI_HEADS.NUM_CLASSES 3", "MODEL.DEVICE cpu", "SOLVER.IMS_PER_BATCH 2", "SOLVER.BASE_LR 0.0005",
             "SOLVER.WARMUP_ITERS 2", "SOLVER.CHECKPOINT_PERIOD 100", "SOLVER.LOG_PERIOD 1",
             "MODEL.RPN.POST_NMS_TOPK_TRAIN 100", "MODEL.RPN.PRE_NMS_TOPK_TRAIN 400",
             "MODEL.ROI_HEADS.BATCH_SIZE_PER_IMAGE 32",
             "INPUT.MIN_SIZE_TRAIN [64] INPUT.MAX_SIZE_TRAIN 64 INPUT.MIN_SIZE_TEST 64 INPUT.MAX_SIZE_TEST 64",
             "DATALOADER.NUM_WORKERS 1", "TENSORBOARD.EVAL_IMAGES 0", "SEED 5"]


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    return make_shapes(tmp_path_factory.mktemp("shapes"), train=8, val=4, seed=11)


def job_tree(root: pathlib.Path, shapes: pathlib.Path, hyperparameters: dict, weights=None) -> pathlib.Path:
    (root / "input" / "config").mkdir(parents=True)
    (root / "input" / "data").mkdir(parents=True)
    for channel in ("train", "val"):
        (root / "input" / "data" / channel).symlink_to(shapes)
    if weights is not None:
        (root / "input" / "data" / "weights").mkdir()
        shutil.copy(weights, root / "input" / "data" / "weights" / weights.name)
    (root / "input" / "config" / "hyperparameters.json").write_text(json.dumps(hyperparameters))
    return root


def zoo_pkl(pth: pathlib.Path, out: pathlib.Path) -> pathlib.Path:
    """The checkpoint in the model zoo's format: numpy arrays in a pickle with an author."""
    state = torch.load(pth, map_location="cpu", weights_only=True)["model"]
    with open(out, "wb") as f:
        pickle.dump({"model": {k: v.numpy() for k, v in state.items()}, "__author__": "Detectron2 Model Zoo"}, f)
    return out


def run_job(root: pathlib.Path, timeout=600):
    proc = start_entrypoint(root, "--master-port", "29571", env=entrypoint_env())
    code = proc.wait(timeout=timeout)
    return code, log_path(root).read_text()


def test_the_detectron2_sagemaker_readme_example_fine_tunes_serves_and_predicts(shapes, tmp_path):
    weights = zoo_pkl(GOLDEN / "mask_rcnn_R_101_C4" / "model_final.pth", tmp_path / "model_final_r101_c4.pkl")
    opts = " ".join(["SOLVER.MAX_ITER 6", *narrow_opts("mask_rcnn_R_101_C4"), *SMALL_RUN])
    root = job_tree(tmp_path / "job", shapes, {
        "config-file": "COCO-InstanceSegmentation/mask_rcnn_R_101_C4_3x.yaml",
        "resume": "True", "eval-only": "False", "opts": opts}, weights=weights)
    code, out = run_job(root)
    assert code == 0, out[-4000:]
    assert "holds no valid checkpoint: starting from the initial weights" in out
    # Detectron2's checkpoint into the 3-class model: everything but the class layers.
    assert "[weights] loaded" in out and str(weights.name) in out
    assert "roi_heads.box_predictor.cls_score.weight" in out  # skipped, with its shapes
    assert "[train] iter: 6/6" in out, out[-2000:]
    model = root / "model"
    config = (model / "config.yaml").read_text()
    assert "build_resnet_backbone" in config and "Res5ROIHeads" in config
    # The model it wrote predicts.
    image = sorted((shapes / "val").glob("*.png"))[0]
    predicted = subprocess.run([str(TRAINER), "predict", "--model-dir", str(model), "--images", str(image),
                                "--output", str(tmp_path / "pred.json"), "--score-threshold", "0.0"],
                               capture_output=True, text=True, timeout=300)
    assert predicted.returncode == 0, predicted.stderr[-3000:]
    assert isinstance(json.loads((tmp_path / "pred.json").read_text()), list)


def test_zoo_weights_that_are_not_in_the_channel_nor_reachable_fail_at_once_naming_them(shapes, tmp_path):
    """No weights channel, and the zoo's mirror refuses connections (the job's network reaches
    no zoo): the download's tries end the job at once, naming the file and the fixes."""
    root = job_tree(tmp_path / "job", shapes, {"config-file": "COCO-InstanceSegmentation/mask_rcnn_R_101_C4_3x.yaml",
                                               "resume": "True", "opts": "SOLVER.MAX_ITER 20000"})
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    env = entrypoint_env(MRCNN_ZOO_MIRROR=f"http://127.0.0.1:{port}/", MRCNN_DOWNLOAD_ATTEMPTS="2",
                         MRCNN_DOWNLOAD_BACKOFF_MS="100")
    started = time.monotonic()
    proc = start_entrypoint(root, "--master-port", "29571", env=env)
    code = proc.wait(timeout=120)
    out = log_path(root).read_text()
    assert code != 0, out[-2000:]
    assert time.monotonic() - started < 60
    failure = (root / "output" / "failure").read_text()
    assert "detectron2://ImageNetPretrained/MSRA/R-101.pkl" in failure, failure
    assert f"http://127.0.0.1:{port}/detectron2/ImageNetPretrained/MSRA/R-101.pkl" in failure, failure
    assert "cannot connect" in failure and "2 tries" in failure, failure
    assert "weights channel" in failure and "MRCNN_ZOO_MIRROR" in failure, failure


def test_a_box_only_coco_file_trains_a_faster_rcnn_evaluated_on_boxes(shapes, tmp_path):
    boxes_only = tmp_path / "boxes_only"
    shutil.copytree(shapes, boxes_only, symlinks=True)
    for annotations in (boxes_only / "annotations").glob("*.json"):
        coco = json.loads(annotations.read_text())
        for a in coco["annotations"]:
            a.pop("segmentation", None)
        annotations.write_text(json.dumps(coco))
    opts = " ".join(["SOLVER.MAX_ITER 4", 'MODEL.WEIGHTS ""', *narrow_opts("faster_rcnn_R_50_FPN"), *SMALL_RUN])
    root = job_tree(tmp_path / "job", boxes_only, {"config-file": "COCO-Detection/faster_rcnn_R_50_FPN_3x.yaml",
                                                   "opts": opts})
    code, out = run_job(root)
    assert code == 0, out[-4000:]
    records = [json.loads(line) for line in (root / "output" / "data" / "metrics.jsonl").read_text().splitlines()]
    evaluations = [r for r in records if "total_loss" not in r]
    assert evaluations, records[-3:]
    text = json.dumps(evaluations)
    assert "bbox" in text and "segm" not in text, text[:2000]
    assert "loss_mask" not in json.dumps(records)
    config = (root / "model" / "config.yaml").read_text()
    assert "MASK_ON: false" in config
