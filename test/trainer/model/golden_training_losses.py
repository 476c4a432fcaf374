"""Our training losses on a Detectron2 golden variant's training data, for the training-parity
tests: the variant's checkpoint (model_final.pth) under its train_config.yaml, in training mode
on the golden images named in its train_targets.json with their boxes and classes, through
model_parity_probe --mode train. Written once for every variant that has train_* files (written
by scripts/detectron2_train_golden.py)."""
import json
import os
import pathlib
import subprocess

import numpy as np
import pytest
import torch
from PIL import Image
from safetensors.torch import load_file, save_file

REPO = pathlib.Path(__file__).resolve().parents[3]
BUILD = pathlib.Path(os.environ.get("MRCNN_BUILD_DIR", REPO / "build"))
PROBE = BUILD / "tests" / "model_parity_probe"
GOLDEN = REPO / "test" / "data" / "detectron2"


def training_losses(variant: pathlib.Path, workdir: pathlib.Path, box_masks: bool) -> dict:
    """{loss name: value} of one training step on the variant's golden batch. box_masks: each
    instance's mask is its box filled (a mask head's target); otherwise empty masks (the probe
    reads masks for every model, and a model without a mask head ignores them)."""
    if not PROBE.exists():
        pytest.fail(f"{PROBE} is not built (set MRCNN_BUILD_DIR)")
    model_dir = workdir / "model"
    model_dir.mkdir()
    (model_dir / "model_final.pth").symlink_to(variant / "model_final.pth")
    (model_dir / "config.yaml").write_text((variant / "train_config.yaml").read_text())
    targets = json.loads((variant / "train_targets.json").read_text())
    tensors = {}
    for i, (name, target) in enumerate(targets.items()):
        rgb = np.asarray(Image.open(GOLDEN / "images" / name).convert("RGB"))
        height, width = rgb.shape[:2]
        masks = torch.zeros(len(target["boxes"]), height, width, dtype=torch.uint8)
        if box_masks:
            for g, (x1, y1, x2, y2) in enumerate(target["boxes"]):
                masks[g, round(y1):round(y2), round(x1):round(x2)] = 1
        tensors[f"image.{i}"] = torch.from_numpy(rgb.astype(np.float32) / 255).permute(2, 0, 1).contiguous()
        tensors[f"target.{i}.boxes"] = torch.tensor(target["boxes"], dtype=torch.float32)
        tensors[f"target.{i}.labels"] = torch.tensor(target["classes"], dtype=torch.int64) + 1  # ours: 0 is background
        tensors[f"target.{i}.masks"] = masks
        if "keypoints" in target:
            tensors[f"target.{i}.keypoints"] = torch.tensor(target["keypoints"], dtype=torch.float32)
    save_file(tensors, str(workdir / "in.safetensors"))
    run = subprocess.run([str(PROBE), "--model-dir", str(model_dir), "--input", str(workdir / "in.safetensors"),
                          "--output", str(workdir / "out.safetensors"), "--mode", "train", "--threads", "2"],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    return {k[len("loss."):]: float(v) for k, v in load_file(str(workdir / "out.safetensors")).items()
            if k.startswith("loss.")}
