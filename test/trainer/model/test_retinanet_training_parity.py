"""RetinaNet trains as Detectron2 does (issue 52): the golden RetinaNet checkpoint in training
mode on two golden images with ground truth (test/data/detectron2/retinanet_R_50_FPN/train_*,
written by scripts/detectron2_retinanet_train_golden.py with Detectron2's own RetinaNet) gives
loss_cls and loss_box_reg as Detectron2 computed them: the same anchors, matcher (IoU
[0.4, 0.5] with low-quality matches), sigmoid focal loss over the anchors not ignored, L1 box
loss (Base-RetinaNet's SMOOTH_L1_LOSS_BETA 0) on the foreground, and the first step's loss
normaliser (0.9 * 100 + 0.1 * the foreground count). RetinaNet samples nothing, so these are
exact functions of the weights, images and boxes."""
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
VARIANT = GOLDEN / "retinanet_R_50_FPN"


def test_retinanet_losses_equal_detectron2s(tmp_path):
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
        tensors[f"image.{i}"] = torch.from_numpy(rgb.astype(np.float32) / 255).permute(2, 0, 1).contiguous()
        tensors[f"target.{i}.boxes"] = torch.tensor(target["boxes"], dtype=torch.float32)
        tensors[f"target.{i}.labels"] = torch.tensor(target["classes"], dtype=torch.int64) + 1  # ours: 1-based
        # The probe reads masks for every model; RetinaNet has no mask head and ignores them.
        tensors[f"target.{i}.masks"] = torch.zeros(len(target["boxes"]), height, width, dtype=torch.uint8)
    save_file(tensors, str(tmp_path / "in.safetensors"))
    run = subprocess.run([str(PROBE), "--model-dir", str(model_dir), "--input", str(tmp_path / "in.safetensors"),
                          "--output", str(tmp_path / "out.safetensors"), "--mode", "train", "--threads", "2"],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    ours = {k[len("loss."):]: float(v) for k, v in load_file(str(tmp_path / "out.safetensors")).items()
            if k.startswith("loss.")}
    expected = json.loads((VARIANT / "train_losses.json").read_text())
    assert sorted(ours) == sorted(expected) == ["loss_box_reg", "loss_cls"], ours
    for name, value in expected.items():
        assert value > 0, (name, value)  # foreground anchors and real work in both losses
        assert ours[name] == pytest.approx(value, rel=1e-4), (name, ours[name], value)
    print({name: (ours[name], value) for name, value in expected.items()})
