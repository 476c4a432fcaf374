#!/usr/bin/env python3
"""Golden training losses of RetinaNet from Detectron2 itself: the golden retinanet_R_50_FPN
checkpoint (made by detectron2_golden.py) in training mode on two golden images with a few
ground-truth boxes, and the losses Detectron2 computes (loss_cls: sigmoid focal loss over
the anchors not ignored by the matcher; loss_box_reg: Base-RetinaNet's smooth L1 at beta 0,
i.e. L1, on the foreground; both divided by the foreground count's moving average, which on
a model's first step is 0.9 * 100 + 0.1 * count).

RetinaNet samples nothing, so the losses are exact functions of the weights, images and
boxes; the config (written as train_config.yaml) keeps the images' size
(INPUT.MIN_SIZE_TRAIN 320, MAX_SIZE_TRAIN 533).

    python scripts/detectron2_retinanet_train_golden.py --detectron2 /work/d2ref/src \\
        --variant-dir test/data/detectron2/retinanet_R_50_FPN

Writes into the variant dir: train_config.yaml, train_targets.json ({image file name: {boxes,
classes (0-based)}}) and train_losses.json ({loss name: value}).
"""
import argparse
import json
import os
import sys

import numpy as np

IMAGES = ["synthetic_1_h427_w320.png", "synthetic_2_h320_w500.png"]
BOXES_PER_IMAGE = 5  # the image's best golden detections, as ground truth
LOSSES = ["loss_cls", "loss_box_reg"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--detectron2", required=True)
    parser.add_argument("--variant-dir", required=True)
    args = parser.parse_args()
    sys.path.insert(0, os.path.abspath(args.detectron2))
    import torch
    from PIL import Image
    from detectron2.checkpoint import DetectionCheckpointer
    from detectron2.config import get_cfg
    from detectron2.modeling import build_model
    from detectron2.structures import Boxes, Instances
    from detectron2.utils.events import EventStorage

    torch.set_num_threads(1)
    cfg = get_cfg()
    cfg.merge_from_file(os.path.join(args.variant_dir, "config.yaml"))
    cfg.MODEL.DEVICE = "cpu"
    cfg.INPUT.MIN_SIZE_TRAIN = (320,)
    cfg.INPUT.MAX_SIZE_TRAIN = 533
    cfg.MODEL.WEIGHTS = ""
    with open(os.path.join(args.variant_dir, "train_config.yaml"), "w") as handle:
        handle.write(cfg.dump())

    expected = json.load(open(os.path.join(args.variant_dir, "expected.json")))
    images_dir = os.path.join(args.variant_dir, "..", "images")
    inputs, targets = [], {}
    for name in IMAGES:
        rgb = np.asarray(Image.open(os.path.join(images_dir, name)).convert("RGB"))
        height, width = rgb.shape[:2]
        boxes = expected[name]["boxes"][:BOXES_PER_IMAGE]
        classes = expected[name]["classes"][:BOXES_PER_IMAGE]
        targets[name] = {"boxes": boxes, "classes": classes}
        instances = Instances((height, width))
        instances.gt_boxes = Boxes(torch.tensor(boxes, dtype=torch.float32))
        instances.gt_classes = torch.tensor(classes, dtype=torch.int64)
        bgr = np.ascontiguousarray(rgb[:, :, ::-1].transpose(2, 0, 1)).astype(np.float32)
        inputs.append({"image": torch.from_numpy(bgr), "instances": instances})

    model = build_model(cfg)
    DetectionCheckpointer(model).load(os.path.join(args.variant_dir, "model_final.pth"))
    model.train()
    with EventStorage(), torch.no_grad():
        losses = model(inputs)
    result = {name: float(losses[name]) for name in LOSSES}
    with open(os.path.join(args.variant_dir, "train_targets.json"), "w") as handle:
        json.dump(targets, handle)
    with open(os.path.join(args.variant_dir, "train_losses.json"), "w") as handle:
        json.dump(result, handle, indent=1)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
