#!/usr/bin/env python3
"""Inference latency/throughput: our C++ Mask R-CNN (InferenceModel::Predict via
build*/bin/model_bench) vs torchvision eager maskrcnn_resnet50_fpn, same weights, same
images, same thread count, in one run. Both sides include preprocessing, mask pasting
at original resolution and the score threshold.

  .venv/bin/python bench/model/bench_inference.py [--device cpu|cuda] [--precision fp32|fp16|bf16]
      [--threads N] [--sizes 800x1333,480x640] [--batches 1,2] [--iters 3]
"""
import argparse
import json
import os
import pathlib
import platform
import subprocess
import sys
import tempfile
import time

import torch
import torchvision
from safetensors.torch import save_file

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
import convert_weights  # noqa: E402


def peaky(model):
    """Random weights give near-uniform class scores (no detection passes 0.05); sharpen
    the classifier so both sides do the full detection + mask work on ~100 boxes."""
    with torch.no_grad():
        model.roi_heads.box_predictor.cls_score.weight.mul_(40.0)


def time_torchvision(model, images, device, precision, iters, warmup):
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(precision)
    times = []
    dets = 0
    for i in range(warmup + iters):
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        with torch.inference_mode(), torch.autocast("cuda", dtype=dtype, enabled=dtype is not None):
            inputs = [torch.from_numpy(img).to(device).permute(2, 0, 1).float().div_(255) for img in images]
            out = model(inputs)
            masks = [(o["masks"] >= 0.5).cpu() for o in out]
        if device == "cuda":
            torch.cuda.synchronize()
        if i >= warmup:
            times.append((time.perf_counter() - start) * 1000)
        dets = sum(len(o["boxes"]) for o in out)
        del masks
    return sum(times) / len(times), min(times), dets


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cpu")
    p.add_argument("--precision", default="fp32")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--sizes", default="800x1333,480x640")
    p.add_argument("--batches", default="1,2")
    p.add_argument("--iters", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--build", default=os.environ.get("MRCNN_BUILD_DIR", str(REPO / "build")))
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    binary = pathlib.Path(args.build) / "bin" / "model_bench"
    assert binary.exists(), f"{binary} not built (cmake --build <build> --target model_bench)"

    torch.manual_seed(0)
    model = torchvision.models.detection.maskrcnn_resnet50_fpn(weights=None, weights_backbone=None, num_classes=91)
    peaky(model)
    model.eval().to(args.device)
    machine = f"{platform.node()} {platform.processor() or platform.machine()}, {os.cpu_count()} cores"
    if args.device == "cuda":
        machine = torch.cuda.get_device_name()
    print(f"# machine: {machine}; device {args.device}, {args.precision}, {args.threads} threads; "
          f"torch {torch.__version__}, torchvision {torchvision.__version__}")
    print("| image (HxW) | batch | ours ms/batch | torchvision ms/batch | ours img/s | torchvision img/s | speedup |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = pathlib.Path(tmp) / "model"
        state = convert_weights.normalised_state_dict(model.cpu())
        model.to(args.device)
        config = convert_weights.torchvision_config(90, 1e-5, {})
        classes = [{"id": i, "name": f"c{i}"} for i in range(1, 91)]
        convert_weights.write_model_dir(state, model_dir, classes, config)
        for size in args.sizes.split(","):
            h, w = map(int, size.split("x"))
            for batch in map(int, args.batches.split(",")):
                g = torch.Generator().manual_seed(h * w + batch)
                images = [torch.randint(0, 256, (h, w, 3), dtype=torch.uint8, generator=g) for _ in range(batch)]
                src = pathlib.Path(tmp) / "images.safetensors"
                save_file({f"image.{i}": img for i, img in enumerate(images)}, str(src))
                res = subprocess.run([str(binary), "--model-dir", str(model_dir), "--input", str(src),
                                      "--batch", str(batch), "--iters", str(args.iters), "--warmup", str(args.warmup),
                                      "--threads", str(args.threads), "--device", args.device,
                                      "--precision", args.precision], check=True, capture_output=True, text=True)
                ours = json.loads(res.stdout.strip().splitlines()[-1])
                tv_mean, tv_min, tv_dets = time_torchvision(model, [i.numpy() for i in images], args.device,
                                                            args.precision, args.iters, args.warmup)
                print(f"| {h}x{w} | {batch} | {ours['mean_ms']:.1f} | {tv_mean:.1f} | "
                      f"{1000 * batch / ours['mean_ms']:.2f} | {1000 * batch / tv_mean:.2f} | "
                      f"{tv_mean / ours['mean_ms']:.2f}x |  (detections ours {ours['detections']}, tv {tv_dets})",
                      flush=True)


if __name__ == "__main__":
    main()
