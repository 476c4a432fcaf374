#!/usr/bin/env python3
"""Golden training losses of Cascade R-CNN from Detectron2 itself: the golden
cascade_mask_rcnn_R_50_FPN checkpoint (made by detectron2_golden.py) in training mode on two
golden images with a few ground-truth boxes, and the per-stage box losses Detectron2 computes
(loss_cls_stage{0,1,2}, loss_box_reg_stage{0,1,2}).

So that the numbers do not depend on random sampling or on the loss differences this trainer
documents, the config (written as train_config.yaml) takes every ROI candidate
(ROI_HEADS.BATCH_SIZE_PER_IMAGE 100000: the sampler's choice is then the whole set, and the
losses are means over it), keeps the images' size (INPUT.MIN_SIZE_TRAIN 320) and sets the box
head's SMOOTH_L1_BETA to 1/9, this trainer's. The RPN's and the mask head's losses are left out
(their sampling and mask targets are this trainer's, trainer/model/README.md).

    python scripts/detectron2_cascade_train_golden.py --detectron2 /work/d2ref/src \\
        --variant-dir test/data/detectron2/cascade_mask_rcnn_R_50_FPN

Writes into the variant dir: train_config.yaml, train_targets.json ({image file name: {boxes,
classes (0-based)}}) and train_losses.json ({loss name: value}).
"""
import argparse
import json
import os
import sys

import numpy as np

IMAGES = ["synthetic_0_h320_w427.png", "synthetic_2_h320_w500.png"]
BOXES_PER_IMAGE = 4  # the image's best golden detections, as ground truth
STAGE_LOSSES = [f"{name}_stage{s}" for s in range(3) for name in ("loss_cls", "loss_box_reg")]


def box_masks(boxes, height, width):
    """Each box filled (uint8 G x H x W): masks for the mask head, which these losses ignore."""
    import torch

    masks = torch.zeros(len(boxes), height, width, dtype=torch.uint8)
    for i, (x1, y1, x2, y2) in enumerate(boxes):
        masks[i, int(round(y1)):int(round(y2)), int(round(x1)):int(round(x2))] = 1
    return masks


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
    from detectron2.structures import BitMasks, Boxes, Instances
    from detectron2.utils.events import EventStorage

    torch.set_num_threads(1)
    cfg = get_cfg()
    cfg.merge_from_file(os.path.join(args.variant_dir, "config.yaml"))
    cfg.MODEL.DEVICE = "cpu"
    cfg.MODEL.ROI_HEADS.BATCH_SIZE_PER_IMAGE = 100000
    cfg.INPUT.MIN_SIZE_TRAIN = (320,)
    cfg.INPUT.MAX_SIZE_TRAIN = 533
    cfg.MODEL.ROI_BOX_HEAD.SMOOTH_L1_BETA = 1.0 / 9
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
        instances.gt_masks = BitMasks(box_masks(boxes, height, width).bool())
        bgr = np.ascontiguousarray(rgb[:, :, ::-1].transpose(2, 0, 1)).astype(np.float32)
        inputs.append({"image": torch.from_numpy(bgr), "instances": instances})

    model = build_model(cfg)
    DetectionCheckpointer(model).load(os.path.join(args.variant_dir, "model_final.pth"))
    model.train()
    with EventStorage(), torch.no_grad():
        losses = model(inputs)
    result = {name: float(losses[name]) for name in STAGE_LOSSES}
    with open(os.path.join(args.variant_dir, "train_targets.json"), "w") as handle:
        json.dump(targets, handle)
    with open(os.path.join(args.variant_dir, "train_losses.json"), "w") as handle:
        json.dump(result, handle, indent=1)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
