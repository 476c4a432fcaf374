"""TensorBoard event files of a real training job, read back with TensorBoard's own
EventAccumulator: every training scalar of every iteration equals metrics.jsonl's, every
COCO number of the final evaluation equals the eval record, the weight/gradient
histograms are there at their period, and a run killed after its checkpoint and resumed
continues the same curves (each step once, in order, with the uninterrupted values)."""
import json
import os
import pathlib
import signal
import subprocess
import time

import pytest
from engine_test_job import TINY_MODEL_OPTS, TRAINER, finish, make_shapes

pytest.importorskip("tensorboard")
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402

MAX_ITER = 8
OPTS = " ".join(TINY_MODEL_OPTS + [
    "SOLVER.IMS_PER_BATCH 2", f"SOLVER.MAX_ITER {MAX_ITER}", "SOLVER.WARMUP_ITERS 2",
    "SOLVER.CHECKPOINT_PERIOD 4", "SOLVER.LOG_PERIOD 3", "TENSORBOARD.HISTOGRAM_PERIOD 3",
    "SEED 11",
])


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    return make_shapes(tmp_path_factory.mktemp("shapes"), train=12, val=3, seed=4)


def make_job(root: pathlib.Path, shapes: pathlib.Path) -> pathlib.Path:
    (root / "input" / "data").mkdir(parents=True)
    for channel in ("train", "val"):
        (root / "input" / "data" / channel).symlink_to(shapes)
    return root


def start(root):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SM_", "RANK", "WORLD_", "MASTER_"))}
    env["MRCNN_CONFIG_DIR"] = str(pathlib.Path(__file__).resolve().parents[3] / "configs")
    return subprocess.Popen([str(TRAINER), "train", "--base-dir", str(root), "--config-file",
                             "mask_rcnn_R_50_FPN_shapes_cpu.yaml", "--opts", OPTS],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)


def accumulate(root):
    acc = EventAccumulator(str(root / "output" / "tensorboard"), size_guidance={"scalars": 0, "histograms": 0})
    acc.Reload()
    return acc


@pytest.fixture(scope="module")
def reference(shapes, tmp_path_factory):
    root = make_job(tmp_path_factory.mktemp("ref"), shapes)
    code, out = finish(start(root))
    assert code == 0, out[-3000:]
    assert "[tensorboard] writing" in out and str(root / "output" / "tensorboard") in out
    return root, accumulate(root)


def test_scalars_are_every_iteration_and_equal_the_log(reference):
    root, acc = reference
    tags = acc.Tags()["scalars"]
    for name in ("total_loss", "loss_classifier", "loss_box_reg", "loss_mask", "loss_objectness",
                 "loss_rpn_box_reg", "lr", "time", "data_time", "images_per_sec", "max_mem_mb"):
        assert f"train/{name}" in tags, (name, tags)
        assert [e.step for e in acc.Scalars(f"train/{name}")] == list(range(1, MAX_ITER + 1)), name
    assert "train/stop_requested" not in tags and "train/eta_seconds" not in tags
    assert "train/checkpoint/saved" not in tags
    # The log's windows are means of these per-iteration values: equal where a window is
    # one iteration long, and the mean of the events over each window otherwise.
    records = [json.loads(l) for l in (root / "output" / "data" / "metrics.jsonl").read_text().splitlines()]
    windows = [r for r in records if "total_loss" in r]
    assert [r["iteration"] for r in windows] == [3, 4, 6, 8]  # every 3, at the checkpoint (4), the end
    values = {e.step: e.value for e in acc.Scalars("train/total_loss")}
    lrs = {e.step: e.value for e in acc.Scalars("train/lr")}
    previous = 0
    for r in windows:
        steps = range(previous + 1, r["iteration"] + 1)
        assert sum(values[s] for s in steps) / len(steps) == pytest.approx(r["total_loss"], rel=1e-6)
        assert lrs[r["iteration"]] == pytest.approx(r["lr"], rel=1e-6)
        previous = r["iteration"]


def test_every_coco_number_of_the_final_evaluation(reference):
    root, acc = reference
    records = [json.loads(l) for l in (root / "output" / "data" / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in records if "total_loss" not in r]
    assert len(evals) == 2
    for record in evals:
        for key, value in record.items():
            if key == "iteration":
                continue
            iou_type, name = key.split("/")
            events = acc.Scalars(f"eval/{iou_type}/{name}")
            assert [e.step for e in events] == [MAX_ITER]
            assert events[0].value == pytest.approx(value, abs=1e-7)
        for name in ("AR1", "AR10", "AR100", "ARs", "ARm", "ARl"):
            assert f"eval/{iou_type}/{name}" in acc.Tags()["scalars"]


def test_weight_and_gradient_histograms_at_their_period(reference):
    _, acc = reference
    histograms = acc.Tags()["histograms"]
    for group in ("backbone.body.layer1", "backbone.fpn", "rpn.head", "roi_heads.box_head", "roi_heads.mask_head"):
        for kind in ("weights", "grads"):
            tag = f"{kind}/{group}"
            assert tag in histograms, (tag, histograms)
            events = acc.Histograms(tag)
            assert [e.step for e in events] == [3, 6]
            h = events[0].histogram_value
            assert h.num > 0 and h.min <= h.max and sum(h.bucket) == pytest.approx(h.num)
        norms = [e.value for e in acc.Scalars(f"train/weights_norm/{group}")]
        assert len(norms) == 2 and all(n > 0 for n in norms)
        assert all(e.value > 0 for e in acc.Scalars(f"train/grads_norm/{group}"))


def test_a_killed_and_resumed_run_continues_the_same_curves(shapes, reference, tmp_path):
    _, ref = reference
    root = make_job(tmp_path / "job", shapes)
    proc = start(root)
    deadline = time.time() + 240
    checkpoint = root / "checkpoints" / "checkpoint_00000004.safetensors"
    metrics = root / "output" / "data" / "metrics.jsonl"
    # Kill it hard once it has logged past the checkpoint (the window ending at iteration 6)
    # and before its next checkpoint (8): a fixed wait after the checkpoint let a fast machine
    # finish the whole run first.
    while not (checkpoint.exists() and metrics.exists() and '"iteration":6' in metrics.read_text().replace(" ", "")):
        assert proc.poll() is None and time.time() < deadline, "no checkpoint at iteration 4 and log past it"
        time.sleep(0.002)
    proc.send_signal(signal.SIGKILL)
    finish(proc)
    assert not (root / "checkpoints" / "checkpoint_00000008.safetensors").exists(), (
        "the run reached its next checkpoint before the kill: nothing to resume from iteration 4")
    code, out = finish(start(root))
    assert code == 0, out[-3000:]
    assert "at iteration 4" in out
    assert len(list((root / "output" / "tensorboard").glob("events.out.tfevents.*"))) == 2
    acc = accumulate(root)
    for tag in ("train/total_loss", "train/lr", "train/loss_mask"):
        got = [(e.step, e.value) for e in acc.Scalars(tag)]
        assert [s for s, _ in got] == list(range(1, MAX_ITER + 1)), (tag, got)
        assert got == [(e.step, e.value) for e in ref.Scalars(tag)], tag


def test_validation_pictures_at_each_evaluation(reference):
    import io

    from PIL import Image
    _, acc = reference
    tags = acc.Tags()["images"]
    assert len(tags) == 3 and all(t.startswith("val/") for t in tags), tags  # 3 val images, at most 4
    for tag in tags:
        events = acc.Images(tag)
        assert [e.step for e in events] == [MAX_ITER]
        picture = Image.open(io.BytesIO(events[0].encoded_image_string))
        assert picture.size == (64, 64) == (events[0].width, events[0].height)
        assert picture.mode == "RGB" and len(set(picture.getdata())) > 10  # a real picture, not blank
