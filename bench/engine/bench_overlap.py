"""Data-parallel step time with the gradient all-reduce overlapped with backward
(DIST.OVERLAP_BACKWARD true) against after backward (false), in the same run, on the same
2-process CPU job through `entrypoint train --nproc-per-node 2` (loopback TCP ring): the
shapes demo's config (ResNet-18-FPN Mask R-CNN, 128 px synthetic shapes, 8 images per
iteration = 4 per process, clipping on) for a few dozen iterations. Two comparisons:

1. Interleaved iterations (the main figure): one job with overlap on and
   MRCNN_BENCH_OVERLAP_ALTERNATE=1, which arms the hooks on iterations 1, 3, 5, ... only;
   the even iterations launch every bucket after backward (the post-backward schedule, the
   same sums on the communication thread). Each overlapped iteration's rank-0 iter_time is
   divided by the mean of its two neighbours', which cancels load that drifts slowly; the
   median of those ratios is printed per run.
2. Whole runs: the job with DIST.OVERLAP_BACKWARD false and true, order alternating per
   round; median iter_time of each and their ratio. These also check that both modes log
   the same losses bit for bit (same gradients).

On a shared machine whole runs drift with the other jobs' load; the interleaved ratio is
the one to read.

  .venv/bin/python bench/engine/bench_overlap.py [--paired-runs 2] [--rounds 2]
      [--iters 30] [--warmup 5] [--opts 'DIST.BUCKET_SIZE_MB 5']
"""
import argparse
import json
import os
import pathlib
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("MRCNN_BUILD_DIR", REPO / "build"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(work: pathlib.Path, shapes: pathlib.Path, overlap: bool, iters: int, extra: str, alternate=False):
    shutil.rmtree(work, ignore_errors=True)
    (work / "input" / "config").mkdir(parents=True)
    (work / "input" / "data").mkdir(parents=True)
    (work / "input" / "data" / "train").symlink_to(shapes)
    opts = (f"SOLVER.MAX_ITER {iters} SOLVER.LOG_PERIOD 1 SOLVER.CHECKPOINT_PERIOD 0 "
            f"DIST.OVERLAP_BACKWARD {'true' if overlap else 'false'} {extra}").strip()
    (work / "input" / "config" / "hyperparameters.json").write_text(json.dumps(
        {"config-file": "mask_rcnn_R_50_FPN_shapes_cpu.yaml", "opts": opts, "resume": "false"}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SM_", "RANK", "WORLD_", "MASTER_"))}
    env.update(MRCNN_TRAINER=str(BUILD / "bin" / "trainer"), MRCNN_CONFIG_DIR=str(REPO / "configs"),
               MASTER_ADDR="127.0.0.1", MRCNN_DIST_ADDR="127.0.0.1")
    if alternate:
        env["MRCNN_BENCH_OVERLAP_ALTERNATE"] = "1"
    t0 = time.monotonic()
    proc = subprocess.run([str(BUILD / "bin" / "entrypoint"), "train", "--base-dir", str(work),
                           "--nproc-per-node", "2", "--master-port", str(free_port())],
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=1800)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        sys.exit(f"training (overlap {overlap}) failed ({proc.returncode}):\n{proc.stdout[-3000:]}")
    records = [json.loads(l) for l in (work / "output" / "data" / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in records if "total_loss" in r]
    return {"iter_time": [r["iter_time"] for r in train], "iteration": [r["iteration"] for r in train],
            "losses": [r["total_loss"] for r in train], "wall": wall}


def interleaved_ratios(got, warmup):
    """iter_time of each overlapped (odd) iteration over the mean of its neighbours'."""
    t = dict(zip(got["iteration"], got["iter_time"]))
    return [t[i] / ((t[i - 1] + t[i + 1]) / 2) for i in sorted(t)
            if i % 2 == 1 and i > warmup and i - 1 in t and i + 1 in t]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--paired-runs", type=int, default=2, help="interleaved-iteration runs")
    ap.add_argument("--rounds", type=int, default=2, help="rounds of whole runs (one per mode)")
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5, help="iterations left out of each run's median")
    ap.add_argument("--opts", default="", help="extra config opts for both modes")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        shapes = tmp / "shapes"
        subprocess.run([str(BUILD / "bin" / "trainer"), "make-shapes", "--output", str(shapes), "--train", "64",
                        "--val", "2", "--size", "128", "--seed", "3"], check=True, capture_output=True)
        paired, interleaved_losses = [], None
        for r in range(args.paired_runs):
            got = run(tmp / "interleaved", shapes, True, args.iters, args.opts, alternate=True)
            interleaved_losses = got["losses"]
            ratios = interleaved_ratios(got, args.warmup)
            paired += ratios
            over = statistics.median(t for i, t in zip(got["iteration"], got["iter_time"])
                                     if i % 2 == 1 and i > args.warmup)
            post = statistics.median(t for i, t in zip(got["iteration"], got["iter_time"])
                                     if i % 2 == 0 and i > args.warmup)
            print(f"interleaved run {r + 1}: median iter_time overlapped {over * 1000:.0f} ms, after backward "
                  f"{post * 1000:.0f} ms; median of {len(ratios)} neighbour ratios {statistics.median(ratios):.3f}",
                  flush=True)
        if paired:
            q = statistics.quantiles(paired, n=4) if len(paired) > 1 else [paired[0]] * 3
            print(f"interleaved overlapped / after backward: median {statistics.median(paired):.3f} "
                  f"(quartiles {q[0]:.3f}-{q[2]:.3f}, {len(paired)} iterations)", flush=True)
        ratios, walls, same = [], [], True
        for r in range(args.rounds):
            order = [False, True] if r % 2 == 0 else [True, False]
            got = {mode: run(tmp / f"overlap_{mode}", shapes, mode, args.iters, args.opts) for mode in order}
            med = {mode: statistics.median(v["iter_time"][args.warmup:]) for mode, v in got.items()}
            same &= got[True]["losses"] == got[False]["losses"]
            same &= interleaved_losses in (None, got[False]["losses"])
            ratios.append(med[True] / med[False])
            walls.append(got[True]["wall"] / got[False]["wall"])
            print(f"round {r + 1} ({'off, on' if order[0] is False else 'on, off'}): median iter_time overlap "
                  f"{med[True] * 1000:.0f} ms, after backward {med[False] * 1000:.0f} ms, ratio {ratios[-1]:.3f}; "
                  f"wall {got[True]['wall']:.1f} s / {got[False]['wall']:.1f} s", flush=True)
        if ratios:
            print(f"whole runs, iter_time overlap / after backward: median {statistics.median(ratios):.3f} "
                  "(rounds: " + ", ".join(f"{x:.3f}" for x in ratios) + f"); wall: median {statistics.median(walls):.3f}")
            print("losses: identical in every run (whole and interleaved)" if same
                  else "losses: DIFFER between the modes")


if __name__ == "__main__":
    main()
