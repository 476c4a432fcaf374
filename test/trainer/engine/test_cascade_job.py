"""Cascade Mask R-CNN through its entry points (issue 52): the zoo's
Misc/cascade_mask_rcnn_R_50_FPN_3x by its name through `entrypoint train`, fine-tuned from a
Detectron2 Cascade checkpoint in the weights channel (the golden cascade variant's, narrow
widths, 5 classes onto the shapes' 3); its per-stage losses in the metrics under Detectron2's
names; and the model it writes predicting (`trainer predict`) and serving (/invocations) the
same detections. The network is the zoo's with the golden variant's narrow widths, so a CPU
runs it in seconds."""
import json
import os
import pathlib
import shutil
import signal
import subprocess
import time
import urllib.request

import pytest
from engine_test_job import TRAINER, entrypoint_env, log_path, make_shapes, start_entrypoint

REPO = pathlib.Path(__file__).resolve().parents[3]
BUILD = pathlib.Path(os.environ.get("MRCNN_BUILD_DIR", REPO / "build"))
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


def ping(url):
    try:
        with urllib.request.urlopen(url + "/ping", timeout=5) as reply:
            return reply.status == 200
    except OSError:
        return False


def served(model_dir: pathlib.Path, images: list, workdir: pathlib.Path) -> list:
    """The server's /invocations answers for `images`, one intra-op thread."""
    port_file = workdir / "port"
    server = subprocess.Popen([str(BUILD / "bin" / "server"), "--host", "127.0.0.1", "--port", "0",
                               "--port-file", str(port_file), "--model-dir", str(model_dir),
                               "--predictor", "model", "--max-batch", "1", "--num-threads", "1"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 300
        url = None
        while url is None or not ping(url):
            assert server.poll() is None, server.stderr.read().decode()[-3000:]
            assert time.time() < deadline, "server never became ready"
            if url is None and port_file.exists():
                url = f"http://127.0.0.1:{int(port_file.read_text())}"
            time.sleep(0.1)
        answers = []
        for path in images:
            request = urllib.request.Request(url + "/invocations", data=path.read_bytes(),
                                             headers={"Content-Type": "image/png"})
            with urllib.request.urlopen(request, timeout=300) as reply:
                answers.append(json.loads(reply.read())["detections"])
        return answers
    finally:
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=60) == 0


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
    predictions = tmp_path / "pred.json"
    predicted = subprocess.run([str(TRAINER), "predict", "--model-dir", str(model), "--images", *map(str, images),
                                "--output", str(predictions), "--threads", "1"],
                               capture_output=True, text=True, timeout=300)
    assert predicted.returncode == 0, predicted.stderr[-3000:]
    results = json.loads(predictions.read_text())
    expected = [[r for r in results if r["image_id"] == i] for i in range(1, len(images) + 1)]
    assert all(expected), "trainer predict found nothing on an image"
    answers = served(model, images, tmp_path)
    for got_image, want_image in zip(answers, expected):
        assert len(got_image) == len(want_image)
        for got, want in zip(got_image, want_image):
            assert got["category_id"] == want["category_id"]
            assert got["score"] == pytest.approx(want["score"], abs=1e-6)
            x, y, w, h = want["bbox"]
            assert got["box"] == pytest.approx([x, y, x + w, y + h], abs=1e-3)
            assert got["mask"]["counts"] == want["segmentation"]["counts"]
