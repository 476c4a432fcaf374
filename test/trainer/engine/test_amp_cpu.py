"""Mixed precision on a CPU: with SOLVER.AMP.ENABLED and SOLVER.AMP.DTYPE bfloat16 the
trainer autocasts its forward pass to bfloat16 on the CPU (the same autocast path CUDA
takes, so it runs in CI). Over 50 iterations of the tiny shapes model the bf16 run's losses
track the float32 run's: while both start from the same weights the per-iteration losses
agree within 5% (iterations 1-8; measured: at most 1.6%), every loss is finite, and once the
runs have drifted apart (sampling amplifies any rounding difference) the mean total_loss of
iterations 26-50 of the bf16 run is at most 10% above the float32 run's. Not closer, and not
two-sided: on this tiny model that mean moves by up to 20% between float32 runs with another
seed (measured at seeds 11/12/13 on 2026-11-26, a 2-vCPU x86-64 machine: 1.63, 1.49, 1.08),
and bf16 landed 12% below, 2% below and 7% above float32 at those seeds. A float16 config on a CPU stays in float32
(identical to AMP off)."""
import json
import os
import subprocess

import pytest

from engine_test_job import ENTRYPOINT, TINY_MODEL_OPTS, TRAINER, finish, make_shapes

ITERS = 50
SOLVER = ["SOLVER.IMS_PER_BATCH 4", f"SOLVER.MAX_ITER {ITERS}", "SOLVER.WARMUP_ITERS 5",
          "SOLVER.BASE_LR 0.01", "SOLVER.CHECKPOINT_PERIOD 1000", "SOLVER.LOG_PERIOD 1", "SEED 11"]


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    return make_shapes(tmp_path_factory.mktemp("shapes"), train=24, val=4, seed=5)


def train(root, shapes, amp_opts, port):
    (root / "input" / "config").mkdir(parents=True)
    (root / "input" / "data").mkdir(parents=True)
    (root / "input" / "data" / "train").symlink_to(shapes)
    opts = " ".join(TINY_MODEL_OPTS + SOLVER + [amp_opts])
    (root / "input" / "config" / "hyperparameters.json").write_text(
        json.dumps({"config-file": "mask_rcnn_R_50_FPN_shapes_cpu.yaml", "opts": opts}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("SM_")}
    env["MRCNN_TRAINER"] = str(TRAINER)
    proc = subprocess.Popen([str(ENTRYPOINT), "train", "--base-dir", str(root), "--master-port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    code, out = finish(proc, timeout=600)
    assert code == 0, out[-3000:]
    records = [json.loads(l) for l in (root / "output" / "data" / "metrics.jsonl").read_text().splitlines()]
    return out, [r["total_loss"] for r in records if "total_loss" in r]


def test_bf16_autocast_on_cpu_tracks_fp32(tmp_path, shapes):
    fp32_out, fp32 = train(tmp_path / "fp32", shapes, "SOLVER.AMP.ENABLED False", 29581)
    bf16_out, bf16 = train(tmp_path / "bf16", shapes, "SOLVER.AMP.ENABLED True SOLVER.AMP.DTYPE bfloat16", 29582)
    assert "amp: off" in fp32_out and "amp: bfloat16" in bf16_out
    assert len(fp32) == len(bf16) == ITERS
    assert all(v == v and abs(v) != float("inf") for v in bf16)
    assert bf16 != fp32, "bf16 autocast changed nothing: it did not run"
    for i in range(8):
        assert abs(bf16[i] - fp32[i]) <= 0.05 * fp32[i], (i + 1, fp32[i], bf16[i])
    late32, late16 = sum(fp32[25:]) / 25, sum(bf16[25:]) / 25
    print(f"fp32 total_loss {fp32[0]:.4f}, mean of iterations 26-50 {late32:.4f}; bf16 {bf16[0]:.4f}, {late16:.4f}")
    assert late16 <= 1.10 * late32
    assert late32 < 0.6 * fp32[0] and late16 < 0.6 * bf16[0]


def test_float16_config_trains_in_float32_on_cpu(tmp_path, shapes):
    off_out, off = train(tmp_path / "off", shapes, "SOLVER.AMP.ENABLED False SOLVER.MAX_ITER 5", 29583)
    fp16_out, fp16 = train(tmp_path / "fp16", shapes, "SOLVER.AMP.ENABLED True SOLVER.AMP.DTYPE float16 SOLVER.MAX_ITER 5",
                           29584)
    assert "amp: off" in fp16_out
    assert fp16 == off
