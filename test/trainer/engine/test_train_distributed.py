"""`entrypoint train --nproc-per-node 2` runs two trainer processes that rendezvous over
c10d's TCPStore and average gradients over our TCP ring (loopback only). After a few
iterations both ranks hold bit-identical weights, and those equal a 1-process run on the
combined batch (same seed) up to floating-point summation order.

Why the 1-vs-2 comparison can be tight: the backbone uses GroupNorm (no statistics across
the batch), each image's anchor/RoI sampling draws from a generator seeded by its image id
(mask_rcnn_trainer.cpp), the RPN and box losses are normalised per sampled anchor/RoI (a fixed
count per image), so the 2-process gradient mean equals the 1-process batch gradient.
The mask loss is a mean over the batch's positive RoIs, whose count differs per image,
so it is not a per-image mean: masks are off here (MODEL.MASK_ON False); that changes
the loss, not the data-parallel machinery.

With DIST.OVERLAP_BACKWARD the buckets' all-reduces start from gradient hooks during the
last backward; with accumulation steps and clipping the weights must equal the
post-backward path's bit for bit, and the bucket trace (MRCNN_BUCKET_TRACE_DIR) must show
the buckets launched in order as backward completed them. Runs the real binaries."""
import json
import os
import pathlib
import socket
import struct
import subprocess
import time

import numpy as np
import pytest
from engine_test_job import ENTRYPOINT, TRAINER, make_shapes

MAX_ITER = 4

OPTS = " ".join([
    "MODEL.MASK_ON False",
    "MODEL.FPN.OUT_CHANNELS 32", "MODEL.ROI_BOX_HEAD.FC_DIM 64",
    "MODEL.RPN.POST_NMS_TOPK_TRAIN 50", "MODEL.ROI_HEADS.BATCH_SIZE_PER_IMAGE 32",
    "INPUT.MIN_SIZE_TRAIN [64] INPUT.MAX_SIZE_TRAIN 64 INPUT.MIN_SIZE_TEST 64 INPUT.MAX_SIZE_TEST 64",
    "SOLVER.IMS_PER_BATCH 4", f"SOLVER.MAX_ITER {MAX_ITER}", "SOLVER.WARMUP_ITERS 1",
    "SOLVER.CHECKPOINT_PERIOD 1000", "SOLVER.LOG_PERIOD 1",
    "DATALOADER.NUM_WORKERS 1", "DATALOADER.ASPECT_RATIO_GROUPING False",
    "DIST.TIMEOUT_SECONDS 60", "SEED 11",
])


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def read_safetensors(path):
    raw = path.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    dtypes = {"F32": np.float32, "I64": np.int64, "F64": np.float64}
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        out[name] = np.frombuffer(raw[8 + n + a:8 + n + b], dtype=dtypes[info["dtype"]]).reshape(info["shape"])
    return out


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    return make_shapes(tmp_path_factory.mktemp("shapes"), train=8, val=2, seed=5)


def train(root, shapes, nproc, opts=OPTS, timeout=240, extra_env=None):
    (root / "input" / "config").mkdir(parents=True)
    (root / "input" / "data").mkdir(parents=True)
    for channel in ("train", "val"):
        (root / "input" / "data" / channel).symlink_to(shapes)
    hp = {"config-file": "mask_rcnn_R_50_FPN_shapes_cpu.yaml", "opts": opts}
    (root / "input" / "config" / "hyperparameters.json").write_text(json.dumps(hp))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SM_", "MASTER_", "RANK", "WORLD_"))}
    env.update(MRCNN_TRAINER=str(TRAINER), MASTER_ADDR="127.0.0.1", MRCNN_DIST_ADDR="127.0.0.1",
               MRCNN_DUMP_WEIGHTS_DIR=str(root / "dump"), **(extra_env or {}))
    start = time.time()
    # Own session: on timeout the whole group (supervisor and trainers) is killed.
    proc = subprocess.Popen([str(ENTRYPOINT), "train", "--base-dir", str(root), "--nproc-per-node", str(nproc),
                             "--master-port", str(free_port())],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        out, _ = proc.communicate()
        pytest.fail(f"{nproc}-process training did not finish in {timeout} s:\n" + out[-4000:])
    finally:
        try:
            os.killpg(proc.pid, 9)  # nothing may outlive the test
        except ProcessLookupError:
            pass
    assert proc.returncode == 0, out[-4000:]
    return out, time.time() - start


def losses(root):
    path = root / "output" / "data" / "metrics.jsonl"
    if not path.exists():
        return []
    records = []
    for line in path.read_text().splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:  # a line being written while we read
            continue
    return [r["total_loss"] for r in records if "total_loss" in r]


@pytest.fixture(scope="module")
def runs(shapes, tmp_path_factory):
    two = tmp_path_factory.mktemp("two")
    out2, t2 = train(two, shapes, 2)
    one = tmp_path_factory.mktemp("one")
    out1, t1 = train(one, shapes, 1)
    print(f"\n2-process run {t2:.1f} s, 1-process run {t1:.1f} s")
    return {"two": two, "one": one, "out2": out2, "out1": out1}


def test_both_ranks_end_bit_identical(runs):
    two = runs["two"]
    assert "gradient all-reduce: tcp-ring" in runs["out2"]
    r0 = read_safetensors(two / "dump" / "final_rank0.safetensors")
    r1 = read_safetensors(two / "dump" / "final_rank1.safetensors")
    init = read_safetensors(two / "dump" / "initial_rank1.safetensors")
    assert r0.keys() == r1.keys()
    for name in r0:
        assert np.array_equal(r0[name], r1[name]), name
    # ...and training moved them (the comparison is not vacuous).
    assert max(float(np.abs(r0[k] - init[k]).max()) for k in r0 if r0[k].dtype == np.float32) > 1e-4


def test_rank0_only_writes_outputs(runs):
    two = runs["two"]
    assert (two / "model" / "model.safetensors").exists()
    assert len(losses(two)) == MAX_ITER  # one metrics record per iteration, from rank 0 only
    lines = [l for l in runs["out2"].splitlines() if "[train] done" in l]
    assert len(lines) == 1, runs["out2"][-3000:]


def test_two_processes_match_one_process_on_the_combined_batch(runs):
    one, two = runs["one"], runs["two"]
    w1 = read_safetensors(one / "dump" / "final_rank0.safetensors")
    w2 = read_safetensors(two / "dump" / "final_rank0.safetensors")
    init = read_safetensors(one / "dump" / "initial_rank0.safetensors")
    init2 = read_safetensors(two / "dump" / "initial_rank0.safetensors")
    for name in init:
        assert np.array_equal(init[name], init2[name]), name  # same seed -> same start
    diff = max(float(np.abs(w1[k] - w2[k]).max()) for k in w1 if w1[k].dtype == np.float32)
    moved = max(float(np.abs(w1[k] - init[k]).max()) for k in w1 if w1[k].dtype == np.float32)
    print(f"\nmax |w(1 proc) - w(2 proc)| = {diff:.3g}; max |update| over the run = {moved:.3g}")
    # Only the summation order differs (a batch-4 conv vs two batch-2 convs, the ring's
    # sum then /2 vs the batch mean): float32 rounding of order 1e-7 relative, grown over
    # MAX_ITER steps. A different anchor/RoI sample or a missing all-reduce changes the
    # update itself, i.e. differences of the order of `moved`.
    assert diff < 1e-3 * moved
    l1, l2 = losses(one), losses(two)
    assert len(l1) == len(l2) == MAX_ITER
    assert np.allclose(l1, l2, rtol=1e-4), (l1, l2)


def test_sigterm_stops_both_ranks_at_the_same_iteration(shapes, tmp_path):
    """The supervisor forwards SIGTERM to both trainers; they agree on the stop through the
    per-step all-reduce, rank 0 checkpoints that iteration, both exit 0 with equal weights."""
    root = tmp_path / "job"
    opts = OPTS.replace(f"SOLVER.MAX_ITER {MAX_ITER}", "SOLVER.MAX_ITER 200")
    (root / "input" / "config").mkdir(parents=True)
    (root / "input" / "data").mkdir(parents=True)
    for channel in ("train", "val"):
        (root / "input" / "data" / channel).symlink_to(shapes)
    (root / "input" / "config" / "hyperparameters.json").write_text(
        json.dumps({"config-file": "mask_rcnn_R_50_FPN_shapes_cpu.yaml", "opts": opts}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SM_", "MASTER_", "RANK", "WORLD_"))}
    env.update(MRCNN_TRAINER=str(TRAINER), MASTER_ADDR="127.0.0.1", MRCNN_DIST_ADDR="127.0.0.1",
               MRCNN_DUMP_WEIGHTS_DIR=str(root / "dump"))
    proc = subprocess.Popen([str(ENTRYPOINT), "train", "--base-dir", str(root), "--nproc-per-node", "2",
                             "--master-port", str(free_port())],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            start_new_session=True)
    try:
        deadline = time.time() + 120
        while len(losses(root)) < 2:
            assert time.time() < deadline, "no 2 iterations within 120 s"
            assert proc.poll() is None, proc.communicate()[0][-3000:]
            time.sleep(0.2)
        proc.send_signal(15)
        out, _ = proc.communicate(timeout=90)
    finally:
        try:
            os.killpg(proc.pid, 9)
        except ProcessLookupError:
            pass
    assert proc.returncode == 0, out[-3000:]
    stops = [l for l in out.splitlines() if "stop requested" in l]
    assert len(stops) == 1, out[-3000:]
    stopped_at = int(stops[0].split("saved iteration ")[1].split(",")[0])
    assert stopped_at < 200
    assert (root / "checkpoints" / f"checkpoint_{stopped_at:08d}.safetensors").exists()
    r0 = read_safetensors(root / "dump" / "final_rank0.safetensors")
    r1 = read_safetensors(root / "dump" / "final_rank1.safetensors")
    for name in r0:
        assert np.array_equal(r0[name], r1[name]), name


# Gradient accumulation (1 image per micro-batch per rank), clipping, and small buckets so
# the model's 90 parameters spread over ~27 buckets.
OVERLAP_OPTS = (OPTS.replace(f"SOLVER.MAX_ITER {MAX_ITER}", "SOLVER.MAX_ITER 3")
                + " SOLVER.ACCUMULATION_STEPS 2 SOLVER.CLIP_GRADIENTS.ENABLED True"
                + " SOLVER.CLIP_GRADIENTS.CLIP_VALUE 1.0 DIST.BUCKET_SIZE_MB 0.5")


@pytest.fixture(scope="module")
def overlap_runs(shapes, tmp_path_factory):
    """The same 2-process job with the all-reduce after backward and overlapped with it."""
    runs = {}
    for mode in ("false", "true"):
        root = tmp_path_factory.mktemp(f"overlap_{mode}")
        (root / "trace").mkdir()
        out, seconds = train(root, shapes, 2, OVERLAP_OPTS + f" DIST.OVERLAP_BACKWARD {mode}",
                             extra_env={"MRCNN_BUCKET_TRACE_DIR": str(root / "trace")})
        print(f"\nDIST.OVERLAP_BACKWARD {mode}: {seconds:.1f} s")
        runs[mode] = {"root": root, "out": out}
    return runs


def test_overlapped_all_reduce_gives_the_post_backward_weights_bit_for_bit(overlap_runs):
    post, overlap = overlap_runs["false"]["root"], overlap_runs["true"]["root"]
    assert "gradient all-reduce: tcp-ring, overlapped with backward" in overlap_runs["true"]["out"]
    assert "overlapped" not in overlap_runs["false"]["out"].split("gradient all-reduce")[1].split(")")[0]
    w_post = read_safetensors(post / "dump" / "final_rank0.safetensors")
    w0 = read_safetensors(overlap / "dump" / "final_rank0.safetensors")
    w1 = read_safetensors(overlap / "dump" / "final_rank1.safetensors")
    init = read_safetensors(overlap / "dump" / "initial_rank0.safetensors")
    assert w0.keys() == w_post.keys() == w1.keys()
    for name in w0:
        assert np.array_equal(w0[name], w_post[name]), name
        assert np.array_equal(w0[name], w1[name]), name
    assert max(float(np.abs(w0[k] - init[k]).max()) for k in w0 if w0[k].dtype == np.float32) > 1e-4
    assert losses(post) == losses(overlap) and len(losses(post)) == 3


def read_trace(path):
    layout, events = [], []
    for line in path.read_text().splitlines():
        if line.startswith("bucket "):
            layout.append([int(p) for p in line.split(":")[1].split()])
        else:
            word, *index = line.split()
            events.append((word, int(index[0]) if index else None))
    return layout, events


def test_buckets_launch_in_order_as_backward_completes_them(overlap_runs):
    """The first iteration's trace, per rank: every bucket launches once, in bucket order,
    at the first moment the readiness seen so far allows it (it and every earlier bucket
    complete), and at least some launch before backward ends (the overlap is real)."""
    trace_dir = overlap_runs["true"]["root"] / "trace"
    assert not list((overlap_runs["false"]["root"] / "trace").iterdir())  # no hooks, no trace
    layouts = []
    for rank in (0, 1):
        layout, events = read_trace(trace_dir / f"bucket_trace_rank{rank}.txt")
        layouts.append(layout)
        num_params = sum(len(b) for b in layout)
        # Reverse registration order, whole parameters.
        assert [p for b in layout for p in b] == list(range(num_params - 1, -1, -1))
        assert len(layout) >= 10
        bucket_of = {p: b for b, params in enumerate(layout) for p in params}
        pending = [len(b) for b in layout]
        next_launch, expected, launched_in_backward, in_backward = 0, [], 0, True
        seen = set()
        for word, index in events:
            if word == "ready":
                assert index not in seen
                seen.add(index)
                assert expected == [], f"rank {rank}: buckets {expected} were complete but not launched"
                pending[bucket_of[index]] -= 1
                while next_launch < len(layout) and pending[next_launch] == 0:
                    expected.append(next_launch)
                    next_launch += 1
            elif word == "launch":
                assert expected and expected[0] == index, f"rank {rank}: launch {index}, expected {expected}"
                expected.pop(0)
                launched_in_backward += in_backward
            else:
                assert word == "backward_end"
                in_backward = False
        assert expected == [] and next_launch == len(layout) and seen == set(range(num_params))
        print(f"\nrank {rank}: {launched_in_backward} of {len(layout)} buckets launched during backward")
        assert launched_in_backward >= 1
    assert layouts[0] == layouts[1]


def test_sync_batch_norm_over_two_processes_matches_one_process_on_the_combined_batch(shapes, tmp_path):
    """SyncBN after the FPN's convs (MODEL.FPN.NORM SyncBN): each rank normalises with the
    statistics of all four images, so the 2-process run ends where the 1-process run on the
    combined batch ends (up to summation order), both ranks hold the same running statistics,
    and those moved from their start."""
    opts = OPTS + " MODEL.FPN.NORM SyncBN"
    out2, _ = train(tmp_path / "two", shapes, 2, opts=opts)
    out1, _ = train(tmp_path / "one", shapes, 1, opts=opts)
    assert "SyncBN layers take batch statistics over 2 ranks" in out2, out2[-3000:]
    assert "SyncBN layers" not in out1
    r0 = read_safetensors(tmp_path / "two" / "dump" / "final_rank0.safetensors")
    r1 = read_safetensors(tmp_path / "two" / "dump" / "final_rank1.safetensors")
    w1 = read_safetensors(tmp_path / "one" / "dump" / "final_rank0.safetensors")
    init = read_safetensors(tmp_path / "one" / "dump" / "initial_rank0.safetensors")
    stats = [k for k in r0 if k.startswith("backbone.fpn.") and k.endswith(("norm.running_mean", "norm.running_var"))]
    assert len(stats) == 16, sorted(r0)[:20]  # 4 lateral + 4 output convs, mean and var each
    for name in stats:
        assert np.array_equal(r0[name], r1[name]), name
        assert float(np.abs(r0[name] - init[name]).max()) > 1e-3, name
        assert np.allclose(r0[name], w1[name], rtol=1e-4, atol=1e-5), name
    diff = max(float(np.abs(w1[k] - r0[k]).max()) for k in w1 if w1[k].dtype == np.float32)
    moved = max(float(np.abs(w1[k] - init[k]).max()) for k in w1 if w1[k].dtype == np.float32)
    print(f"\nSyncBN: max |w(1 proc) - w(2 proc)| = {diff:.3g}; max |update| = {moved:.3g}")
    assert diff < 1e-3 * moved
