#!/usr/bin/env python3
"""SageMakerCV's recipe against the shapes demo's, same data, same iterations, one run:
each variant trains through `entrypoint train` exactly as scripts/demo.sh does (config
mask_rcnn_R_50_FPN_shapes_cpu.yaml: 300 iterations of 8 images, 400 training / 50
validation images of 128 px, seed 1), with its own `opts`, and is evaluated on the
validation set at the end. Prints one line per variant (box and mask AP/AP50, wall time)
and the AP50 differences against the first variant.

  .venv/bin/python bench/engine/bench_recipe.py [--build DIR] [--work DIR] [--iters N]
      [--variants sgd,novograd_giou] [--variant NAME='OPTS' ...]
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[2]

# The demo's own solver (SGD, lr 0.02, warmup + cosine, smooth L1), and SageMakerCV's fast
# recipe scaled to 8 images: NovoGrad with layer-wise second moments and SageMakerCV's betas
# (0.9, 0.4), the same cosine schedule, GIoU box regression in the RPN and the ROI head with
# Detectron2's GIoU loss weights (2 and 10, its mask_rcnn_R_50_FPN_1x_giou.yaml). The
# novograd_giou opts are exactly configs/mask_rcnn_R_50_FPN_shapes_cpu_novograd_giou.yaml.
GIOU = ("MODEL.RPN.BBOX_REG_LOSS_TYPE giou MODEL.RPN.BBOX_REG_LOSS_WEIGHT 2.0 "
        "MODEL.ROI_BOX_HEAD.BBOX_REG_LOSS_TYPE giou MODEL.ROI_BOX_HEAD.BBOX_REG_LOSS_WEIGHT 10.0")
NOVOGRAD = "SOLVER.OPTIMIZER NovoGrad SOLVER.BASE_LR 0.02 SOLVER.BETAS [0.9,0.4] SOLVER.WEIGHT_DECAY 0.001"
VARIANTS = {
    "sgd": "",
    "novograd_giou": f"{NOVOGRAD} {GIOU}",
    "sgd_giou": GIOU,
    "novograd": NOVOGRAD,
}


def run_variant(name, opts, build, work, shapes, iters):
    base = work / name
    subprocess.run(["rm", "-rf", str(base)], check=True)
    for d in ("input/config", "input/data", "model", "output", "checkpoints"):
        (base / d).mkdir(parents=True)
    for channel in ("train", "val"):
        (base / "input" / "data" / channel).symlink_to(shapes)
    full_opts = f"{opts} SOLVER.MAX_ITER {iters} TEST.EVAL_PERIOD 0".strip()
    (base / "input" / "config" / "hyperparameters.json").write_text(json.dumps({
        "config-file": json.dumps("mask_rcnn_R_50_FPN_shapes_cpu.yaml"), "opts": json.dumps(full_opts),
        "resume": json.dumps("false")}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("SM_")}
    env["MRCNN_CONFIG_DIR"] = str(REPO / "configs")
    start = time.monotonic()
    run = subprocess.run([str(build / "bin" / "entrypoint"), "train", "--base-dir", str(base)],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    wall = time.monotonic() - start
    if run.returncode != 0:
        print(run.stdout[-3000:])
        raise SystemExit(f"{name}: entrypoint train exited {run.returncode}")
    records = [json.loads(l) for l in (base / "output" / "data" / "metrics.jsonl").read_text().splitlines()]
    final = {}
    for r in records:
        final.update({k: v for k, v in r.items() if k.startswith(("bbox/", "segm/"))})
    losses = [r["total_loss"] for r in records if "total_loss" in r]
    return final, wall, losses[-1]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", type=pathlib.Path, default=pathlib.Path(os.environ.get("MRCNN_BUILD_DIR", REPO / "build")))
    p.add_argument("--work", type=pathlib.Path, default=REPO / "bench" / "out" / "recipe")
    p.add_argument("--iters", type=int, default=300)
    p.add_argument("--variants", default="sgd,novograd_giou", help=f"of {', '.join(VARIANTS)}")
    p.add_argument("--variant", action="append", default=[], metavar="NAME=OPTS",
                   help="an extra variant with its own opts (after --variants)")
    a = p.parse_args()
    names = [n for n in a.variants.split(",") if n]
    for extra in a.variant:
        name, _, opts = extra.partition("=")
        VARIANTS[name] = opts
        names.append(name)
    a.work.mkdir(parents=True, exist_ok=True)
    shapes = a.work / "shapes"
    if not (shapes / "annotations" / "instances_val.json").exists():
        subprocess.run([str(a.build / "bin" / "trainer"), "make-shapes", "--output", str(shapes), "--train", "400",
                        "--val", "50", "--seed", "1", "--size", "128"], check=True, stdout=subprocess.DEVNULL)
    results = {}
    for name in names:
        final, wall, last_loss = run_variant(name, VARIANTS[name], a.build, a.work, shapes, a.iters)
        results[name] = final
        print(f"recipe {name}: box AP {final['bbox/AP']:.4f} AP50 {final['bbox/AP50']:.4f}  "
              f"mask AP {final['segm/AP']:.4f} AP50 {final['segm/AP50']:.4f}  last total_loss {last_loss:.4f}  "
              f"{a.iters} iterations in {wall:.0f} s  opts: {VARIANTS[name] or '(the demo config)'}", flush=True)
    first = next(iter(results))
    for name, final in results.items():
        if name != first:
            print(f"recipe {name} - {first}: box AP50 {final['bbox/AP50'] - results[first]['bbox/AP50']:+.4f}, "
                  f"mask AP50 {final['segm/AP50'] - results[first]['segm/AP50']:+.4f}")


if __name__ == "__main__":
    sys.exit(main())
