#!/usr/bin/env python3
"""A short real training on the GPU, the way SageMaker starts one: a shapes data set, an
/opt/ml tree, `entrypoint train` with the shapes config moved to CUDA, AMP and 800 px
images through `opts`. Passes when the job exits 0, no logged loss is NaN/inf, the loss
of the last logged window is below the first one's, and images/s was logged. Prints the
figures as `train-smoke: ...` lines for the GPU check's report; the trained model dir is
what the predict comparison uses afterwards.

  python3 scripts/gpu-check/train_smoke.py --build BUILD --work DIR [--amp bf16|fp16]
      [--iters 120] [--size 800]
"""
import argparse
import json
import math
import os
import pathlib
import subprocess
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[2]


def lay_out(base: pathlib.Path, shapes: pathlib.Path, opts: str) -> None:
    for d in ("input/config", "input/data", "model", "output", "checkpoints"):
        (base / d).mkdir(parents=True, exist_ok=True)
    for channel in ("train", "val"):
        link = base / "input" / "data" / channel
        if not link.exists():
            link.symlink_to(shapes)
    config = base / "input" / "config"
    (config / "hyperparameters.json").write_text(json.dumps({
        "config-file": json.dumps("mask_rcnn_R_50_FPN_shapes_cpu.yaml"),
        "opts": json.dumps(opts), "resume": json.dumps("false")}))
    (config / "resourceconfig.json").write_text(json.dumps({
        "current_host": "algo-1", "hosts": ["algo-1"], "network_interface_name": "lo"}))
    channel = {"TrainingInputMode": "File", "S3DistributionType": "FullyReplicated"}
    (config / "inputdataconfig.json").write_text(json.dumps({"train": channel, "val": channel}))
    (config / "checkpointconfig.json").write_text(json.dumps({"LocalPath": str(base / "checkpoints")}))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", type=pathlib.Path, required=True)
    p.add_argument("--work", type=pathlib.Path, required=True)
    p.add_argument("--amp", default="bf16", choices=["bf16", "fp16"])
    p.add_argument("--iters", type=int, default=120)
    p.add_argument("--size", type=int, default=800)
    p.add_argument("--device", default="cuda", help="cpu only to try the script itself")
    p.add_argument("--cuda-graphs", action="store_true",
                   help="SOLVER.CUDA_GRAPHS on, one shape: the square padded image (CUDA only)")
    args = p.parse_args()

    bin_dir = args.build / "bin"
    shapes = args.work / "shapes"
    if not (shapes / "annotations" / "instances_val.json").exists():
        subprocess.run([str(bin_dir / "trainer"), "make-shapes", "--output", str(shapes), "--train", "96",
                        "--val", "16", "--seed", "1", "--size", "256"], check=True)
    dtype = {"bf16": "bfloat16", "fp16": "float16"}[args.amp]
    # Larger anchors for 800 px inputs (the shapes config's are for 128 px).
    opts = (f"MODEL.DEVICE {args.device} SOLVER.AMP.ENABLED True SOLVER.AMP.DTYPE {dtype} "
            f"INPUT.MIN_SIZE_TRAIN ({args.size},) INPUT.MAX_SIZE_TRAIN {args.size} "
            f"INPUT.MIN_SIZE_TEST {args.size} INPUT.MAX_SIZE_TEST {args.size} "
            "MODEL.ANCHOR_GENERATOR.SIZES [[32],[64],[128],[256],[512]] "
            f"SOLVER.MAX_ITER {args.iters} SOLVER.WARMUP_ITERS {max(1, args.iters // 10)} "
            f"SOLVER.CHECKPOINT_PERIOD {args.iters} SOLVER.LOG_PERIOD 10 DATALOADER.NUM_WORKERS 4")
    if args.cuda_graphs:
        opts += f" SOLVER.CUDA_GRAPHS.ENABLED True SOLVER.CUDA_GRAPHS.SHAPES [[{-(-args.size // 32) * 32},{-(-args.size // 32) * 32}]]"
    base = args.work / f"opt_ml_{args.amp}{'_graphs' if args.cuda_graphs else ''}"
    lay_out(base, shapes, opts)
    env = dict(os.environ, MRCNN_CONFIG_DIR=str(REPO / "configs"))
    start = time.monotonic()
    rc = subprocess.run([str(bin_dir / "entrypoint"), "train", "--base-dir", str(base)], env=env).returncode
    wall = time.monotonic() - start
    failures = []
    if rc != 0:
        failure = base / "output" / "failure"
        failures.append(f"entrypoint train exited {rc}: "
                        f"{failure.read_text().strip() if failure.exists() else 'no output/failure'}")
    metrics = base / "output" / "data" / "metrics.jsonl"
    windows = []
    if metrics.exists():
        windows = [r for r in map(json.loads, metrics.read_text().splitlines()) if "total_loss" in r]
    if len(windows) < 2:
        failures.append(f"{metrics}: fewer than two logged training windows")
    else:
        losses = [r["total_loss"] for r in windows]
        speeds = [r.get("images_per_sec", 0.0) for r in windows]
        if not all(math.isfinite(v) for r in windows for k, v in r.items() if isinstance(v, float)):
            failures.append("a logged value is NaN or inf")
        if not losses[-1] < losses[0]:
            failures.append(f"the loss did not fall: {losses[0]:.4f} -> {losses[-1]:.4f}")
        # fp16: the loss scale, kept on the device and read with the losses, is in every window.
        scales = [r.get("loss_scale") for r in windows]
        if args.amp == "fp16" and not all(isinstance(v, float) and v > 0 for v in scales):
            failures.append(f"fp16 windows without a positive loss_scale: {scales}")
        print(f"train-smoke: amp {args.amp}, {args.size} px, cuda graphs {'on' if args.cuda_graphs else 'off'}, {args.iters} iterations in {wall:.1f} s; "
              f"total_loss {losses[0]:.4f} -> {losses[-1]:.4f}; images/s (last window) {speeds[-1]:.1f}; "
              f"max_mem_mb {windows[-1].get('max_mem_mb', 'n/a')}; loss_scale {windows[-1].get('loss_scale', 'n/a')}")
    if not (base / "model" / "model.safetensors").exists():
        failures.append("no model/model.safetensors written")
    for f in failures:
        print(f"train-smoke: FAILED: {f}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
