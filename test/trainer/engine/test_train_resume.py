"""`entrypoint train` -> `trainer train` on a tiny CPU config: a SIGTERM'd run resumes to
the uninterrupted run's loss sequence bit for bit; a SIGKILL'd run resumes from its last
periodic checkpoint; a truncated checkpoint is skipped. Runs the real binaries."""
import json
import os
import pathlib
import shutil
import signal
import subprocess
import time

import pytest
from engine_test_job import ENTRYPOINT, TRAINER, finish, make_shapes

MAX_ITER = 12

OPTS = " ".join([
    "MODEL.FPN.OUT_CHANNELS 32", "MODEL.ROI_BOX_HEAD.FC_DIM 64", "MODEL.ROI_MASK_HEAD.CONV_DIM 32",
    "MODEL.RPN.POST_NMS_TOPK_TRAIN 50", "MODEL.ROI_HEADS.BATCH_SIZE_PER_IMAGE 32",
    "INPUT.MIN_SIZE_TRAIN [64] INPUT.MAX_SIZE_TRAIN 64 INPUT.MIN_SIZE_TEST 64 INPUT.MAX_SIZE_TEST 64",
    "SOLVER.IMS_PER_BATCH 2", f"SOLVER.MAX_ITER {MAX_ITER}", "SOLVER.WARMUP_ITERS 2",
    "SOLVER.CHECKPOINT_PERIOD 4", "SOLVER.CHECKPOINTS_TO_KEEP 5", "SOLVER.LOG_PERIOD 1",
    "DATALOADER.NUM_WORKERS 1", "SEED 7",
])


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    return make_shapes(tmp_path_factory.mktemp("shapes"), train=16, val=4, seed=3)


def make_job(root: pathlib.Path, shapes: pathlib.Path, **hyper):
    (root / "input" / "config").mkdir(parents=True)
    (root / "input" / "data").mkdir(parents=True)
    for channel in ("train", "val"):
        (root / "input" / "data" / channel).symlink_to(shapes)
    hp = {"config-file": "mask_rcnn_R_50_FPN_shapes_cpu.yaml", "opts": OPTS}
    hp.update(hyper)
    (root / "input" / "config" / "hyperparameters.json").write_text(json.dumps(hp))
    return root


def start(root):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SM_")}
    env["MRCNN_TRAINER"] = str(TRAINER)
    return subprocess.Popen([str(ENTRYPOINT), "train", "--base-dir", str(root), "--master-port", "29561"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)


def train_records(root):
    """The last record of each iteration (a killed run's tail is redone after resume)."""
    path = root / "output" / "data" / "metrics.jsonl"
    records = {}
    for line in path.read_text().splitlines() if path.exists() else []:
        r = json.loads(line)
        if "total_loss" in r:
            records[r["iteration"]] = {k: v for k, v in r.items() if k.startswith("loss") or k in ("total_loss", "lr")}
    return records


def wait_for_iteration(root, proc, iteration):
    deadline = time.time() + 240
    while time.time() < deadline:
        if proc.poll() is not None:
            pytest.fail("training ended before the interrupt:\n" + proc.stdout.read()[-3000:])
        if max(train_records(root), default=0) >= iteration:
            return
        time.sleep(0.02)
    proc.kill()
    pytest.fail("no progress")


def checkpoints(root):
    return sorted(p.name for p in (root / "checkpoints").glob("checkpoint_*.safetensors"))


@pytest.fixture(scope="module")
def reference(shapes, tmp_path_factory):
    root = make_job(tmp_path_factory.mktemp("ref"), shapes)
    code, out = finish(start(root))
    assert code == 0, out[-3000:]
    records = train_records(root)
    assert sorted(records) == list(range(1, MAX_ITER + 1))
    for name in ("model.safetensors", "config.yaml", "classes.json"):
        assert (root / "model" / name).is_file()
    assert "[eval] iter: 12  bbox/AP:" in out and "[eval] iter: 12  segm/AP:" in out
    assert checkpoints(root) == [f"checkpoint_{i:08d}.safetensors" for i in (4, 8, 12)]
    # max_mem on CPU is the process's peak RSS: LibTorch alone is over 100 MiB, and a peak
    # never falls.
    mem = [json.loads(l)["max_mem_mb"] for l in (root / "output" / "data" / "metrics.jsonl").read_text().splitlines()
           if "total_loss" in l]
    assert mem[0] > 100 and mem == sorted(mem), mem
    return root, records


def test_sigterm_then_resume_equals_uninterrupted_bit_for_bit(shapes, reference, tmp_path):
    ref_root, ref = reference
    root = make_job(tmp_path / "job", shapes)
    proc = start(root)
    wait_for_iteration(root, proc, 5)
    proc.send_signal(signal.SIGTERM)
    code, out = finish(proc)
    assert code == 0, out[-3000:]
    stopped_at = max(train_records(root))
    assert stopped_at < MAX_ITER, "the run finished before the signal arrived; nothing was tested"
    assert f"checkpoint_{stopped_at:08d}.safetensors" in checkpoints(root)
    assert not (root / "model" / "model.safetensors").exists()

    code, out = finish(start(root))
    assert code == 0, out[-3000:]
    assert f"resumed from" in out and f"at iteration {stopped_at}" in out
    assert train_records(root) == ref  # every loss and lr, compared as exact floats


def test_sigkill_resumes_from_last_periodic_checkpoint(shapes, reference, tmp_path):
    _, ref = reference
    root = make_job(tmp_path / "job", shapes)
    proc = start(root)
    wait_for_iteration(root, proc, 6)
    children = [int(p) for p in pathlib.Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()]
    assert children, "the entrypoint has no trainer child"
    for pid in children:
        os.kill(pid, signal.SIGKILL)
    code, out = finish(proc)
    assert code != 0
    killed_after = max(train_records(root))
    last_periodic = max(i for i in (4, 8) if i <= killed_after)
    assert checkpoints(root)[-1] == f"checkpoint_{last_periodic:08d}.safetensors"

    code, out = finish(start(root))
    assert code == 0, out[-3000:]
    assert f"at iteration {last_periodic}" in out
    assert train_records(root) == ref


def test_truncated_checkpoint_is_skipped(shapes, reference, tmp_path):
    ref_root, ref = reference
    root = make_job(tmp_path / "job", shapes)
    (root / "checkpoints").mkdir()
    for i in (4, 8):
        shutil.copy(ref_root / "checkpoints" / f"checkpoint_{i:08d}.safetensors", root / "checkpoints")
    newest = root / "checkpoints" / "checkpoint_00000008.safetensors"
    newest.write_bytes(newest.read_bytes()[: newest.stat().st_size // 2])
    code, out = finish(start(root))
    assert code == 0, out[-3000:]
    assert "warning" in out and "checkpoint_00000008" in out
    assert "at iteration 4" in out
    records = train_records(root)
    assert sorted(records) == list(range(5, MAX_ITER + 1))
    assert records == {i: ref[i] for i in range(5, MAX_ITER + 1)}


def test_resume_false_starts_fresh(shapes, reference, tmp_path):
    ref_root, ref = reference
    root = make_job(tmp_path / "job", shapes, resume="False")
    shutil.copytree(ref_root / "checkpoints", root / "checkpoints")
    code, out = finish(start(root))
    assert code == 0, out[-3000:]
    assert "resumed from" not in out
    assert train_records(root) == ref


def test_resume_true_on_a_first_run_starts_from_the_initial_weights(shapes, reference, tmp_path):
    """Detectron2's resume_or_load(resume=True), as detectron2-sagemaker's README passes it:
    no checkpoint yet means the initial weights, not an error."""
    _, ref = reference
    root = make_job(tmp_path / "job", shapes, resume="True")
    code, out = finish(start(root))
    assert code == 0, out[-3000:]
    assert "holds no valid checkpoint: starting from the initial weights" in out
    assert "resumed from" not in out
    assert train_records(root) == ref


def eval_records(root):
    path = root / "output" / "data" / "metrics.jsonl"
    return [r for r in map(json.loads, path.read_text().splitlines()) if "total_loss" not in r]


def test_eval_only_evaluates_the_given_weights_and_writes_no_model(shapes, reference, tmp_path):
    ref_root, _ = reference
    root = make_job(tmp_path / "job", shapes, **{"eval-only": "true"})
    (root / "input" / "data" / "weights").symlink_to(ref_root / "model")
    code, out = finish(start(root))
    assert code == 0, out[-3000:]
    assert "[train] iter:" not in out
    assert not (root / "model" / "model.safetensors").exists()
    assert not checkpoints(root) if (root / "checkpoints").exists() else True
    # The same weights on the same validation images: the reference's final AP, exactly.
    got = eval_records(root)
    want = [r for r in eval_records(ref_root) if r["iteration"] == MAX_ITER]
    assert len(got) == 2 and len(want) == 2, (got, want)
    for g, w in zip(got, want):
        assert {k: v for k, v in g.items() if k != "iteration"} == {k: v for k, v in w.items() if k != "iteration"}


def test_eval_only_without_a_val_channel_names_the_fix(shapes, reference, tmp_path):
    ref_root, _ = reference
    root = make_job(tmp_path / "job", shapes, **{"eval-only": "true"})
    (root / "input" / "data" / "val").unlink()
    (root / "input" / "data" / "weights").symlink_to(ref_root / "model")
    code, out = finish(start(root))
    assert code != 0
    assert "eval-only" in out and ("val" in out or "DATASETS.TEST" in out), out[-2000:]
