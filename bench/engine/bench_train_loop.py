"""The whole training loop of two `trainer` binaries, paired: each round runs both (order
alternating) on the same tiny job (synthetic shapes at 64 px, the resume tests' narrow
ResNet-18-FPN, SEED 7, one process on CPU) and reads the per-iteration `iter_time` from
their metrics.jsonl. Prints each round's medians and the ratio ours / baseline, plus whole
wall times. For checking that a change to the engine (hooks, event store, writers) costs
nothing per iteration: build the baseline from the commit before, e.g.

    git worktree add /tmp/base <commit> && (cd /tmp/base && scripts/setup.sh)
    .venv/bin/python bench/engine/bench_train_loop.py --baseline /tmp/base/build/bin/trainer

Both runs must print the same losses (the loop's arithmetic is unchanged); the script
says when they differ."""
import argparse
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[2]

OPTS = " ".join([
    "MODEL.FPN.OUT_CHANNELS 32", "MODEL.ROI_BOX_HEAD.FC_DIM 64", "MODEL.ROI_MASK_HEAD.CONV_DIM 32",
    "MODEL.RPN.POST_NMS_TOPK_TRAIN 50", "MODEL.ROI_HEADS.BATCH_SIZE_PER_IMAGE 32",
    "INPUT.MIN_SIZE_TRAIN [64] INPUT.MAX_SIZE_TRAIN 64 INPUT.MIN_SIZE_TEST 64 INPUT.MAX_SIZE_TEST 64",
    "SOLVER.IMS_PER_BATCH 4", "SOLVER.WARMUP_ITERS 2", "SOLVER.CHECKPOINT_PERIOD 0",
    "SOLVER.LOG_PERIOD 1", "DATALOADER.NUM_WORKERS 1", "SEED 7",
])


def run(trainer: pathlib.Path, shapes: pathlib.Path, work: pathlib.Path, iters: int):
    shutil.rmtree(work, ignore_errors=True)
    (work / "input" / "data").mkdir(parents=True)
    (work / "input" / "data" / "train").symlink_to(shapes)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SM_", "RANK", "WORLD_", "MASTER_"))}
    env["MRCNN_CONFIG_DIR"] = str(REPO / "configs")
    cmd = [str(trainer), "train", "--base-dir", str(work), "--config-file", "mask_rcnn_R_50_FPN_shapes_cpu.yaml",
           "--opts", OPTS + f" SOLVER.MAX_ITER {iters}", "--resume", "false"]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        sys.exit(f"{trainer} failed ({proc.returncode}):\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    records = [json.loads(l) for l in (work / "output" / "data" / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in records if "total_loss" in r]
    return {"iter_time": [r["iter_time"] for r in train], "losses": [r["total_loss"] for r in train], "wall": wall}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trainer", default=str(pathlib.Path(os.environ.get("MRCNN_BUILD_DIR", REPO / "build")) / "bin" / "trainer"))
    ap.add_argument("--baseline", required=True, help="the other trainer binary")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=5, help="iterations left out of each run's median")
    args = ap.parse_args()
    ours, base = pathlib.Path(args.trainer), pathlib.Path(args.baseline)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        shapes = tmp / "shapes"
        subprocess.run([str(ours), "make-shapes", "--output", str(shapes), "--train", "32", "--val", "2",
                        "--size", "64", "--seed", "3"], check=True, capture_output=True)
        ratios, walls = [], []
        same_losses = True
        for r in range(args.rounds):
            order = [("ours", ours), ("baseline", base)] if r % 2 == 0 else [("baseline", base), ("ours", ours)]
            got = {name: run(exe, shapes, tmp / name, args.iters) for name, exe in order}
            med = {k: statistics.median(v["iter_time"][args.warmup:]) for k, v in got.items()}
            same_losses &= got["ours"]["losses"] == got["baseline"]["losses"]
            ratios.append(med["ours"] / med["baseline"])
            walls.append(got["ours"]["wall"] / got["baseline"]["wall"])
            print(f"round {r + 1}: median iter_time ours {med['ours'] * 1000:.1f} ms, baseline "
                  f"{med['baseline'] * 1000:.1f} ms, ratio {ratios[-1]:.3f}; wall ours {got['ours']['wall']:.1f} s, "
                  f"baseline {got['baseline']['wall']:.1f} s", flush=True)
        print(f"iter_time ours/baseline: median {statistics.median(ratios):.3f} (rounds: "
              + ", ".join(f"{x:.3f}" for x in ratios) + f"); wall ours/baseline: median {statistics.median(walls):.3f}")
        print("losses: identical in every round" if same_losses else "losses: DIFFER between the binaries")


if __name__ == "__main__":
    main()
