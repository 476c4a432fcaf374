"""Cascade R-CNN trains as Detectron2 does (issue 52): the golden cascade checkpoint in
training mode on two golden images with ground truth (test/data/detectron2/
cascade_mask_rcnn_R_50_FPN/train_*, written by scripts/detectron2_cascade_train_golden.py with
Detectron2's own CascadeROIHeads) gives every stage's classification and box regression loss
as Detectron2 computed them. The config takes every ROI candidate (no random subsampling), so
the losses fix stage 0's matching, each later stage's boxes, its re-matching at its IoU (0.6,
0.7) and the per-stage normalisation."""
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
VARIANT = GOLDEN / "cascade_mask_rcnn_R_50_FPN"


def test_cascade_stage_losses_equal_detectron2s(tmp_path):
    if not PROBE.exists():
        pytest.fail(f"{PROBE} is not built (set MRCNN_BUILD_DIR)")
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "model_final.pth").symlink_to(VARIANT / "model_final.pth")
    (model_dir / "config.yaml").write_text((VARIANT / "train_config.yaml").read_text())
    targets = json.loads((VARIANT / "train_targets.json").read_text())
    tensors = {}
    for i, (name, target) in enumerate(targets.items()):
        rgb = np.asarray(Image.open(GOLDEN / "images" / name).convert("RGB"))
        height, width = rgb.shape[:2]
        boxes = torch.tensor(target["boxes"], dtype=torch.float32)
        masks = torch.zeros(len(boxes), height, width, dtype=torch.uint8)
        for g, (x1, y1, x2, y2) in enumerate(target["boxes"]):
            masks[g, round(y1):round(y2), round(x1):round(x2)] = 1
        tensors[f"image.{i}"] = torch.from_numpy(rgb.astype(np.float32) / 255).permute(2, 0, 1).contiguous()
        tensors[f"target.{i}.boxes"] = boxes
        tensors[f"target.{i}.labels"] = torch.tensor(target["classes"], dtype=torch.int64) + 1  # ours: 0 is background
        tensors[f"target.{i}.masks"] = masks
    save_file(tensors, str(tmp_path / "in.safetensors"))
    run = subprocess.run([str(PROBE), "--model-dir", str(model_dir), "--input", str(tmp_path / "in.safetensors"),
                          "--output", str(tmp_path / "out.safetensors"), "--mode", "train", "--threads", "2"],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    ours = {k[len("loss."):]: float(v) for k, v in load_file(str(tmp_path / "out.safetensors")).items()
            if k.startswith("loss.")}
    expected = json.loads((VARIANT / "train_losses.json").read_text())
    assert len(expected) == 6
    assert "loss_classifier" not in ours and "loss_box_reg" not in ours, ours
    for name, value in expected.items():
        assert value > 0, (name, value)  # every stage has positives and real work
        assert ours[name] == pytest.approx(value, rel=2e-3), (name, ours[name], value)
    print({name: (ours[name], value) for name, value in expected.items()})
