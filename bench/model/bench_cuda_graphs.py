#!/usr/bin/env python3
"""SOLVER.CUDA_GRAPHS against eager: our training step (build*/bin/train_step_bench) run
twice on the same batch from the same weights and seed, once with the backbone, FPN and
RPN head replayed from CUDA graphs and once eagerly on the same padded batch (the
reference the graphs must reproduce). Steps interleave one by one, order flipping every
step. Prints the first step's losses of both (sampling draws the same numbers on both
sides, so they must agree to float tolerance), the mean step time of each over the
measured steps, the ATen operators per step (a kernel-launch proxy) and the ratio.

    bench/model/bench_cuda_graphs.py --device cuda --amp bf16 [--size 800x1333] [--batch 8]
        [--shapes 800x1344,1344x800] [--iters 10] [--warmup 2]

On a CPU both sides run the padded stage eagerly (graphs need CUDA): a check of this
script and of the padding, not of the graphs. Exit status 1 when the first-step losses
differ by more than --loss-rtol.
"""
import argparse
import os
import pathlib
import statistics
import sys
import tempfile

import torch
from safetensors.torch import save_file

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import bench_train_step as bts  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--amp", default="off", choices=["off", "fp16", "bf16"])
    p.add_argument("--size", default=None, help="HxW; default 800x1333 on CUDA, 256x384 on CPU")
    p.add_argument("--batch", type=int, default=None, help="default 8 on CUDA, 2 on CPU")
    p.add_argument("--shapes", default=None,
                   help="SOLVER.CUDA_GRAPHS.SHAPES as HxW,...; default: the padded batch and its transpose")
    p.add_argument("--objects", type=int, default=8)
    p.add_argument("--num-classes", type=int, default=90)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2, help="unmeasured steps per side (the graphed side captures in its first)")
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--optimizer", default="sgd", choices=["sgd", "novograd"])
    p.add_argument("--loss-rtol", type=float, default=2e-2,
                   help="largest relative difference of a first-step loss (bf16 autocast rounds differently "
                        "where the graph's kernels fuse; fp32 agrees far closer)")
    p.add_argument("--build", default=os.environ.get("MRCNN_BUILD_DIR", str(bts.REPO / "build")))
    args = p.parse_args()
    cuda = args.device == "cuda"
    if not cuda and args.amp != "off":
        raise SystemExit("--amp applies to CUDA only")
    height, width = map(int, (args.size or ("800x1333" if cuda else "256x384")).split("x"))
    args.batch = args.batch or (8 if cuda else 2)
    padded = [-(-v // 32) * 32 for v in (height, width)]
    shapes = args.shapes or f"{padded[0]}x{padded[1]},{padded[1]}x{padded[0]}"
    binary = pathlib.Path(args.build) / "bin" / "train_step_bench"
    if not binary.exists():
        raise SystemExit(f"{binary} not built (cmake --build <build> --target train_step_bench)")
    torch.manual_seed(args.seed)
    model = bts.torchvision_model(args.num_classes, height, width, resize=False)
    machine = torch.cuda.get_device_name() if cuda else f"CPU, {os.cpu_count()} cores"
    print(f"# machine: {machine}; device {args.device}, amp {args.amp}; batch {args.batch} x {height}x{width}, "
          f"graph shapes {shapes}; {args.warmup} warm-up + {args.iters} measured steps per side, interleaved; "
          f"optimizer {args.optimizer}, lr {args.lr}", flush=True)
    if not cuda:
        print("# CPU: both sides run the padded stage eagerly (CUDA graphs need CUDA)", flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        model_dir = pathlib.Path(tmp) / "model"
        config = bts.convert_weights.torchvision_config(
            args.num_classes, 1e-5,
            {"INPUT.MIN_SIZE_TRAIN": [min(height, width)], "INPUT.MAX_SIZE_TRAIN": max(height, width)})
        classes = [{"id": i, "name": f"c{i}"} for i in range(1, args.num_classes + 1)]
        bts.convert_weights.write_model_dir(bts.convert_weights.normalised_state_dict(model), model_dir, classes,
                                            config)
        batch_file = pathlib.Path(tmp) / "batch.safetensors"
        save_file(bts.make_batch(args.batch, height, width, args.objects, args.num_classes, args.seed),
                  str(batch_file))
        base = [str(binary), "--model-dir", str(model_dir), "--input", str(batch_file), "--batch", str(args.batch),
                "--threads", str(args.threads), "--device", args.device, "--amp", args.amp, "--lr", str(args.lr),
                "--seed", str(args.seed), "--optimizer", args.optimizer, "--graph-shapes", shapes]
        sides = {"eager (padded)": bts.OursStep(base + ["--graph-mode", "pad"]),
                 "graphed": bts.OursStep(base + ["--graph-mode", "graph" if cuda else "pad"])}
        ms = {name: [] for name in sides}
        first = {}
        runs = {}
        try:
            for it in range(args.warmup + args.iters):
                order = list(sides.items())
                if it % 2:
                    order.reverse()
                for name, side in order:
                    r = side.request("log-step" if it == 0 else "step")
                    if it == 0:
                        first[name] = (r["ms"], r["losses"])
                    elif it >= args.warmup:
                        ms[name].append(r["ms"])
                    runs[name] = r.get("feature_stage_runs")
            counts = {name: side.request("count")["ops"] for name, side in sides.items()}
        finally:
            for side in sides.values():
                side.close()

    eager_losses, graphed_losses = first["eager (padded)"][1], first["graphed"][1]
    worst = 0.0
    print("| first-step loss | eager (padded) | graphed | relative difference |")
    print("| --- | --- | --- | --- |")
    for key in sorted(eager_losses):
        e, g = eager_losses[key], graphed_losses.get(key, float("nan"))
        rel = abs(g - e) / max(abs(e), 1e-6)
        worst = max(worst, rel) if rel == rel else float("inf")
        print(f"| {key} | {e:.6f} | {g:.6f} | {rel:.2e} |")
    print()
    print("| side | first step ms (graphed: capture) | ms/step mean | median | min | images/s | aten ops/step | feature stage runs |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for name in sides:
        m = ms[name]
        print(f"| {name} | {first[name][0]:.1f} | {statistics.mean(m):.1f} | {statistics.median(m):.1f} | {min(m):.1f} | "
              f"{1000 * args.batch / statistics.mean(m):.2f} | {counts[name]['aten_ops']} | {runs[name]} |")
    ratio = statistics.mean(ms["eager (padded)"]) / statistics.mean(ms["graphed"])
    print(f"\nratio eager/graphed step time: {ratio:.3f}x; first-step losses: largest relative difference "
          f"{worst:.2e} (limit {args.loss_rtol})")
    if not worst <= args.loss_rtol:
        print("FAIL: the graphed step's losses differ from eager on the same padded batch")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
