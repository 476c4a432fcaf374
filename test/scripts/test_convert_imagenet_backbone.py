"""scripts/convert_weights.py --imagenet-backbone: a torchvision ImageNet ResNet classifier
(random-initialised here: same keys and shapes as the published checkpoints) becomes a
MODEL.WEIGHTS file whose tensors are exactly the backbone's, named as torchvision's Mask
R-CNN names them; the trainer then loads all of them and logs which modules start from
their initialisation."""
import json
import os
import pathlib
import subprocess
import sys

import pytest
import torch
import torchvision
from safetensors.torch import load_file

REPO = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("MRCNN_BUILD_DIR", REPO / "build"))
CONVERT = REPO / "scripts" / "convert_weights.py"


def convert(source: pathlib.Path, output: pathlib.Path):
    return subprocess.run([sys.executable, str(CONVERT), "--imagenet-backbone", str(source), "--output", str(output)],
                          capture_output=True, text=True)


@pytest.mark.parametrize("arch", ["resnet50", "resnet101", "resnet18"])
def test_backbone_tensors_named_as_mask_rcnn_names_them(tmp_path, arch):
    torch.manual_seed(1)
    classifier = getattr(torchvision.models, arch)(weights=None).state_dict()
    torch.save(classifier, tmp_path / "imagenet.pth")
    result = convert(tmp_path / "imagenet.pth", tmp_path / "backbone.safetensors")
    assert result.returncode == 0, result.stderr
    assert f"MODEL.BACKBONE.NAME {arch}" in result.stderr
    tensors = load_file(str(tmp_path / "backbone.safetensors"))
    expected = {k for k in classifier if not k.startswith("fc.") and not k.endswith("num_batches_tracked")}
    assert set(tensors) == {"backbone.body." + k for k in expected}
    for k in expected:
        assert torch.equal(tensors["backbone.body." + k], classifier[k].float())
    # The names and shapes torchvision's own Mask R-CNN with this backbone has.
    backbone = torchvision.models.detection.backbone_utils.resnet_fpn_backbone(
        backbone_name=arch, weights=None, trainable_layers=3)
    mask_rcnn = {"backbone." + k: v for k, v in backbone.state_dict().items()}
    for name, value in tensors.items():
        assert name in mask_rcnn and mask_rcnn[name].shape == value.shape, name


def test_refuses_what_is_not_a_resnet_classifier(tmp_path):
    torch.save(torchvision.models.vgg11(weights=None).state_dict(), tmp_path / "vgg.pth")
    result = convert(tmp_path / "vgg.pth", tmp_path / "out.safetensors")
    assert result.returncode != 0 and "not a torchvision ResNet classification state dict" in result.stderr
    wide = torchvision.models.resnet34(weights=None).state_dict()
    torch.save(wide, tmp_path / "r34.pth")
    result = convert(tmp_path / "r34.pth", tmp_path / "out.safetensors")
    assert result.returncode != 0 and "[3, 4, 6, 3] basic blocks per stage" in result.stderr
    assert not (tmp_path / "out.safetensors").exists()


def test_trainer_logs_what_it_loaded_and_left_at_initialisation(tmp_path):
    trainer, entrypoint = BUILD / "bin" / "trainer", BUILD / "bin" / "entrypoint"
    for exe in (trainer, entrypoint):
        if not exe.exists():
            pytest.fail(f"{exe} is not built (set MRCNN_BUILD_DIR)")
    torch.manual_seed(2)
    torch.save(torchvision.models.resnet18(weights=None).state_dict(), tmp_path / "r18.pth")
    assert convert(tmp_path / "r18.pth", tmp_path / "weights" / "r18.safetensors").returncode == 0
    shapes = tmp_path / "shapes"
    subprocess.run([str(trainer), "make-shapes", "--output", str(shapes), "--train", "4", "--val", "2",
                    "--size", "64", "--seed", "5"], check=True, capture_output=True)
    root = tmp_path / "ml"
    (root / "input" / "config").mkdir(parents=True)
    (root / "input" / "data").mkdir(parents=True)
    (root / "input" / "data" / "train").symlink_to(shapes)
    (root / "input" / "data" / "weights").symlink_to(tmp_path / "weights")
    # The shapes config's ResNet-18 with FrozenBN, as an ImageNet start would use it.
    opts = ("MODEL.BACKBONE.NORM FrozenBN MODEL.BACKBONE.TRAINABLE_LAYERS 3 MODEL.FPN.OUT_CHANNELS 32 "
            "INPUT.MIN_SIZE_TRAIN [64] INPUT.MAX_SIZE_TRAIN 64 SOLVER.IMS_PER_BATCH 2 SOLVER.MAX_ITER 1 "
            "DATALOADER.NUM_WORKERS 1")
    (root / "input" / "config" / "hyperparameters.json").write_text(
        json.dumps({"config-file": "mask_rcnn_R_50_FPN_shapes_cpu.yaml", "opts": opts}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("SM_")}
    env["MRCNN_TRAINER"] = str(trainer)
    run = subprocess.run([str(entrypoint), "train", "--base-dir", str(root), "--master-port", "29571"],
                         capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:]
    lines = [l for l in run.stdout.splitlines() if "[weights]" in l]
    n = len(load_file(str(tmp_path / "weights" / "r18.safetensors")))
    assert any(f"[weights] loaded {n} of the model's " in l for l in lines), lines
    left = next(l for l in lines if "left at initialisation" in l)
    for module in ("backbone.fpn", "rpn.head", "roi_heads.box_head", "roi_heads.box_predictor",
                   "roi_heads.mask_head", "roi_heads.mask_predictor"):
        assert module + ": " in left, left
    assert "backbone.body" not in left
    assert not any("skipped" in l for l in lines), lines
