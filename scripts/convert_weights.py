#!/usr/bin/env python3
"""Turn a torchvision Mask R-CNN checkpoint (or a Detectron2 one, with --config) into a model dir
for the C++ toolkit, or a
torchvision ImageNet ResNet classifier into backbone weights for MODEL.WEIGHTS.

The model dir (documented in trainer/model/README.md) holds
  model.safetensors  tensors named exactly like torchvision's state_dict keys
  config.yaml        Detectron2-style keys (MODEL.ROI_HEADS.NUM_CLASSES, INPUT.MIN_SIZE_TEST, ...)
  classes.json       [{"id": <dataset category id>, "name": "..."}] in label order (label i+1 = entry i)

Sources:
  --checkpoint FILE   a torchvision state dict (.pth), or a dict holding one under "model"
                      (torchvision's reference training scripts save that)
  --random-seed N     a freshly initialised maskrcnn_resnet50_fpn(weights=None, weights_backbone=None)
                      (for tests and benchmarks)
  --imagenet-backbone FILE
                      a torchvision ImageNet classification state dict of a ResNet-18, -50 or -101
                      (torchvision.models.resnet50(weights="IMAGENET1K_V1").state_dict(), saved
                      with torch.save): the start of every COCO recipe. Writes ONE safetensors
                      file (--output FILE.safetensors) with the backbone's tensors renamed
                      backbone.body.<name>; the classifier (fc.*) and BatchNorm counters are
                      dropped. Put it in the `weights` channel or name it in MODEL.WEIGHTS; the
                      trainer logs what it loaded and which modules (FPN, RPN, heads) start from
                      their initialisation. Use MODEL.BACKBONE.NAME resnet101 for a ResNet-101.

  --checkpoint FILE --config config.yaml
                      a Detectron2 checkpoint (a job's model_final.pth, a model zoo .pkl) with
                      the config.yaml Detectron2 wrote beside it: the model dir of the same
                      network in Detectron2's convention (trainer/model/README.md, "Detectron2
                      models"). The C++ trainer does the reading and the name mapping
                      (`trainer import-weights`, the same code a training job loads them with):
                      it is found through MRCNN_TRAINER, the build dir (MRCNN_BUILD_DIR or
                      build/), or PATH. --classes names the classes (default: Detectron2's
                      0-based class indices as ids). A .pkl checkpoint needs --config too.

The checkpoint is loaded into torchvision's own model first, so older key layouts that
torchvision upgrades on load (e.g. rpn.head.conv.weight) come out in the current names.
BatchNorm's num_batches_tracked counters are dropped (the C++ backbone uses frozen BN).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

import torch
import torchvision
import yaml
from safetensors.torch import save_file


def torchvision_config(num_classes, frozen_bn_eps, overrides):
    """Config for torchvision's maskrcnn_resnet50_fpn defaults; num_classes excludes background."""
    config = {
        "MODEL": {
            "BACKBONE": {"NAME": "resnet50", "NORM": "FrozenBN", "FROZEN_BN_EPS": frozen_bn_eps, "TRAINABLE_LAYERS": 3},
            "NECK": {"NAME": "fpn"},
            "FPN": {"OUT_CHANNELS": 256},
            "ANCHOR_GENERATOR": {"SIZES": [[32], [64], [128], [256], [512]], "ASPECT_RATIOS": [[0.5, 1.0, 2.0]]},
            "RPN": {
                "HEAD_NAME": "standard",
                "PRE_NMS_TOPK_TRAIN": 2000,
                "PRE_NMS_TOPK_TEST": 1000,
                "POST_NMS_TOPK_TRAIN": 2000,
                "POST_NMS_TOPK_TEST": 1000,
                "NMS_THRESH": 0.7,
                "IOU_THRESHOLDS": [0.3, 0.7],
                "BATCH_SIZE_PER_IMAGE": 256,
                "POSITIVE_FRACTION": 0.5,
                "SCORE_THRESH": 0.0,
                "MIN_SIZE": 0.001,
            },
            "ROI_HEADS": {
                "NUM_CLASSES": num_classes,
                "SCORE_THRESH_TEST": 0.05,
                "NMS_THRESH_TEST": 0.5,
                "IOU_THRESHOLDS": [0.5, 0.5],
                "BATCH_SIZE_PER_IMAGE": 512,
                "POSITIVE_FRACTION": 0.25,
            },
            "ROI_BOX_HEAD": {
                "NAME": "two_mlp",
                "FC_DIM": 1024,
                "POOLER_RESOLUTION": 7,
                "POOLER_SAMPLING_RATIO": 2,
                "BBOX_REG_WEIGHTS": [10.0, 10.0, 5.0, 5.0],
            },
            "MASK_ON": True,
            "ROI_MASK_HEAD": {"NAME": "four_conv", "CONV_DIM": 256, "POOLER_RESOLUTION": 14, "POOLER_SAMPLING_RATIO": 2},
            # 0..255 RGB, torchvision's ImageNet statistics (0.485, 0.456, 0.406) / (0.229, 0.224, 0.225).
            "PIXEL_MEAN": [123.675, 116.28, 103.53],
            "PIXEL_STD": [58.395, 57.12, 57.375],
        },
        "INPUT": {"MIN_SIZE_TRAIN": [800], "MAX_SIZE_TRAIN": 1333, "MIN_SIZE_TEST": 800, "MAX_SIZE_TEST": 1333,
                  "SIZE_DIVISIBILITY": 32},
        "TEST": {"DETECTIONS_PER_IMAGE": 100},
    }
    for key, value in overrides.items():
        node = config
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return config


def parse_overrides(pairs):
    out = {}
    for pair in pairs or []:
        if "=" not in pair:
            raise SystemExit(f"--set {pair!r}: expected KEY=VALUE, e.g. MODEL.ROI_HEADS.SCORE_THRESH_TEST=0.0")
        key, value = pair.split("=", 1)
        out[key] = yaml.safe_load(value)
    return out


def read_classes(path, num_classes):
    """classes.json entries from a COCO annotation file, a categories list, or None (generic names)."""
    if path is None:
        return [{"id": i, "name": f"class_{i}"} for i in range(1, num_classes + 1)]
    with open(path) as f:
        data = json.load(f)
    if isinstance(data, dict):
        if "categories" not in data:
            raise SystemExit(f"{path}: a JSON object must be a COCO annotation file with 'categories'")
        data = sorted(data["categories"], key=lambda c: c["id"])
    classes = [{"id": int(c["id"]), "name": str(c["name"])} for c in data]
    if len(classes) != num_classes:
        raise SystemExit(f"{path}: has {len(classes)} classes but the checkpoint predicts {num_classes} "
                         "foreground classes (cls_score rows minus background)")
    return classes


def load_checkpoint(path):
    data = torch.load(path, map_location="cpu", weights_only=True)
    if isinstance(data, dict) and "model" in data and isinstance(data["model"], dict):
        data = data["model"]
    if not isinstance(data, dict) or "roi_heads.box_predictor.cls_score.weight" not in data:
        raise SystemExit(f"{path}: not a torchvision Mask R-CNN state dict "
                         "(no roi_heads.box_predictor.cls_score.weight)")
    return data


def build_torchvision(num_classes_with_background):
    return torchvision.models.detection.maskrcnn_resnet50_fpn(
        weights=None, weights_backbone=None, num_classes=num_classes_with_background)


def normalised_state_dict(model):
    """float32 contiguous tensors by torchvision key, without BatchNorm counters."""
    return {k: v.detach().to(torch.float32).contiguous().clone()
            for k, v in model.state_dict().items() if not k.endswith("num_batches_tracked")}


def write_model_dir(state_dict, output, classes, config):
    os.makedirs(output, exist_ok=True)
    save_file(state_dict, os.path.join(output, "model.safetensors"),
              metadata={"format": "pt", "source": "torchvision maskrcnn_resnet50_fpn"})
    with open(os.path.join(output, "config.yaml"), "w") as f:
        yaml.safe_dump(config, f, sort_keys=False)
    with open(os.path.join(output, "classes.json"), "w") as f:
        json.dump(classes, f, indent=1)


RESNET_BLOCKS = {"resnet18": [2, 2, 2, 2], "resnet50": [3, 4, 6, 3], "resnet101": [3, 4, 23, 3]}


def imagenet_backbone(path):
    """backbone.body.* tensors from a torchvision ResNet-18/50/101 classification state dict,
    and the architecture's name. Refuses anything else with the reason."""
    data = torch.load(path, map_location="cpu", weights_only=True)
    if isinstance(data, dict) and "model" in data and isinstance(data["model"], dict):
        data = data["model"]
    if not isinstance(data, dict) or "conv1.weight" not in data or "fc.weight" not in data:
        raise SystemExit(f"{path}: not a torchvision ResNet classification state dict "
                         "(expected conv1.weight ... layer4.* and fc.weight)")
    blocks = [len({k.split(".")[1] for k in data if k.startswith(f"layer{i}.")}) for i in range(1, 5)]
    kind = "bottleneck" if "layer1.0.conv3.weight" in data else "basic"
    arch = next((name for name, want in RESNET_BLOCKS.items()
                 if want == blocks and (kind == "basic") == (name == "resnet18")), None)
    if arch is None:
        raise SystemExit(f"{path}: a ResNet with {blocks} {kind} blocks per stage; the backbones here are "
                         + ", ".join(f"{name} {want}" for name, want in RESNET_BLOCKS.items()))
    reference = getattr(torchvision.models, arch)(weights=None).state_dict()
    tensors = {}
    for key, value in data.items():
        if key.startswith("fc.") or key.endswith("num_batches_tracked"):
            continue
        if key not in reference or reference[key].shape != value.shape:
            raise SystemExit(f"{path}: tensor {key} {tuple(value.shape)} does not fit torchvision's {arch}")
        tensors["backbone.body." + key] = value.detach().to(torch.float32).contiguous().clone()
    missing = [k for k in reference if not k.startswith("fc.") and not k.endswith("num_batches_tracked")
               and "backbone.body." + k not in tensors]
    if missing:
        raise SystemExit(f"{path}: lacks {len(missing)} of {arch}'s tensors, e.g. {missing[:3]}")
    return tensors, arch


def trainer_binary():
    """The C++ trainer that reads Detectron2 checkpoints."""
    if os.environ.get("MRCNN_TRAINER"):
        return os.environ["MRCNN_TRAINER"]
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    built = os.path.join(os.environ.get("MRCNN_BUILD_DIR", os.path.join(repo, "build")), "bin", "trainer")
    if os.path.exists(built):
        return built
    found = shutil.which("trainer")
    if not found:
        raise SystemExit("a Detectron2 checkpoint is converted by the C++ trainer (trainer import-weights), which "
                         "was not found: build it (scripts/setup.sh) or set MRCNN_TRAINER")
    return found


def import_detectron2(checkpoint, config, classes, output):
    command = [trainer_binary(), "import-weights", "--checkpoint", checkpoint, "--config", config, "--output", output]
    if classes:
        command += ["--classes", classes]
    result = subprocess.run(command)
    if result.returncode != 0:
        raise SystemExit(f"trainer import-weights failed (exit {result.returncode}) for {checkpoint}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--checkpoint", help="torchvision state dict (.pth), or with --config a Detectron2 "
                                             "checkpoint (.pth, .pkl)")
    source.add_argument("--random-seed", type=int, help="build a randomly initialised model with this seed")
    source.add_argument("--imagenet-backbone", metavar="FILE",
                        help="torchvision ImageNet ResNet-18/50/101 state dict -> backbone weights file")
    parser.add_argument("--num-classes", type=int, default=90,
                        help="foreground classes for --random-seed (torchvision's num_classes minus 1)")
    parser.add_argument("--config", metavar="config.yaml",
                        help="with --checkpoint: the file is Detectron2's, and this its config.yaml")
    parser.add_argument("--classes", help="COCO annotation JSON or [{id,name}] list giving the class names")
    parser.add_argument("--frozen-bn-eps", type=float, default=1e-5,
                        help="BatchNorm eps (torchvision's COCO_V1 Mask R-CNN checkpoint needs 0.0)")
    parser.add_argument("--set", action="append", metavar="KEY=VALUE",
                        help="override a config.yaml key, e.g. --set MODEL.ROI_HEADS.SCORE_THRESH_TEST=0.0")
    parser.add_argument("--output", required=True,
                        help="model dir to write (with --imagenet-backbone: the .safetensors file)")
    args = parser.parse_args(argv)

    if args.imagenet_backbone:
        tensors, arch = imagenet_backbone(args.imagenet_backbone)
        if os.path.dirname(args.output):
            os.makedirs(os.path.dirname(args.output), exist_ok=True)
        save_file(tensors, args.output, metadata={"format": "pt", "source": f"torchvision {arch} ImageNet backbone"})
        print(f"wrote {args.output}: {len(tensors)} backbone tensors of a {arch} "
              f"(MODEL.BACKBONE.NAME {arch})", file=sys.stderr)
        return

    if args.config or (args.checkpoint and args.checkpoint.endswith(".pkl")):
        if not (args.checkpoint and args.config):
            raise SystemExit("a Detectron2 checkpoint needs both --checkpoint and --config (its config.yaml)")
        import_detectron2(args.checkpoint, args.config, args.classes, args.output)
        return

    if args.checkpoint:
        state = load_checkpoint(args.checkpoint)
        num_classes = state["roi_heads.box_predictor.cls_score.weight"].shape[0] - 1
        model = build_torchvision(num_classes + 1)
        missing, unexpected = model.load_state_dict(state, strict=False)
        missing = [k for k in missing if not k.endswith("num_batches_tracked")]
        if missing or unexpected:
            raise SystemExit(f"{args.checkpoint}: does not match maskrcnn_resnet50_fpn: "
                             f"missing {missing[:5]}, unexpected {unexpected[:5]}")
    else:
        num_classes = args.num_classes
        torch.manual_seed(args.random_seed)
        model = build_torchvision(num_classes + 1)
    config = torchvision_config(num_classes, args.frozen_bn_eps, parse_overrides(args.set))
    write_model_dir(normalised_state_dict(model), args.output, read_classes(args.classes, num_classes), config)
    print(f"wrote {args.output}: {num_classes} classes", file=sys.stderr)


if __name__ == "__main__":
    main()
