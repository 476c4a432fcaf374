"""Data-parallel step time with the gradient all-reduce overlapped with backward
(DIST.OVERLAP_BACKWARD true) against after backward (false), in the same run: each round
trains the same 2-process CPU job twice through `entrypoint train --nproc-per-node 2`
(loopback TCP ring), once per mode, the order alternating per round, so both modes see the
same background load. The job is the shapes demo's config (ResNet-18-FPN Mask R-CNN,
128 px synthetic shapes, 8 images per iteration = 4 per process, clipping on) for a few
dozen iterations. Prints each round's median rank-0 `iter_time` (after the warm-up
iterations) per mode and the ratio overlap / after-backward, then the median of the
rounds. Both modes must log the same losses bit for bit (same gradients); the script says
when they do not.

  .venv/bin/python bench/engine/bench_overlap.py [--rounds 3] [--iters 30] [--warmup 5]
      [--opts 'DIST.BUCKET_SIZE_MB 5']
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


def run(work: pathlib.Path, shapes: pathlib.Path, overlap: bool, iters: int, extra: str):
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
    t0 = time.monotonic()
    proc = subprocess.run([str(BUILD / "bin" / "entrypoint"), "train", "--base-dir", str(work),
                           "--nproc-per-node", "2", "--master-port", str(free_port())],
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=1800)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        sys.exit(f"training (overlap {overlap}) failed ({proc.returncode}):\n{proc.stdout[-3000:]}")
    records = [json.loads(l) for l in (work / "output" / "data" / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in records if "total_loss" in r]
    return {"iter_time": [r["iter_time"] for r in train], "losses": [r["total_loss"] for r in train], "wall": wall}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5, help="iterations left out of each run's median")
    ap.add_argument("--opts", default="", help="extra config opts for both modes")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        shapes = tmp / "shapes"
        subprocess.run([str(BUILD / "bin" / "trainer"), "make-shapes", "--output", str(shapes), "--train", "64",
                        "--val", "2", "--size", "128", "--seed", "3"], check=True, capture_output=True)
        ratios, walls, same = [], [], True
        for r in range(args.rounds):
            order = [False, True] if r % 2 == 0 else [True, False]
            got = {mode: run(tmp / f"overlap_{mode}", shapes, mode, args.iters, args.opts) for mode in order}
            med = {mode: statistics.median(v["iter_time"][args.warmup:]) for mode, v in got.items()}
            same &= got[True]["losses"] == got[False]["losses"]
            ratios.append(med[True] / med[False])
            walls.append(got[True]["wall"] / got[False]["wall"])
            print(f"round {r + 1} ({'off, on' if order[0] is False else 'on, off'}): median iter_time overlap "
                  f"{med[True] * 1000:.0f} ms, after backward {med[False] * 1000:.0f} ms, ratio {ratios[-1]:.3f}; "
                  f"wall {got[True]['wall']:.1f} s / {got[False]['wall']:.1f} s", flush=True)
        print(f"iter_time overlap / after backward: median {statistics.median(ratios):.3f} (rounds: "
              + ", ".join(f"{x:.3f}" for x in ratios) + f"); wall: median {statistics.median(walls):.3f}")
        print("losses: identical in every round" if same else "losses: DIFFER between the modes")


if __name__ == "__main__":
    main()
