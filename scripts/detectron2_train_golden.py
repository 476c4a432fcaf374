#!/usr/bin/env python3
"""Golden training losses from Detectron2 itself: a golden variant's checkpoint (made by
detectron2_golden.py) in training mode on two golden images with a few ground-truth boxes (the
image's best golden detections), and the losses Detectron2 computes. One config per variant:

- cascade_mask_rcnn_R_50_FPN: the per-stage box losses (loss_cls_stage{0,1,2},
  loss_box_reg_stage{0,1,2}). So that they do not depend on random sampling or on the loss
  differences this trainer documents, the config takes every ROI candidate
  (ROI_HEADS.BATCH_SIZE_PER_IMAGE 100000: the sampler's choice is then the whole set, and the
  losses are means over it) and sets the box head's SMOOTH_L1_BETA to 1/9, this trainer's.
  The RPN's and the mask head's losses are left out (their sampling and mask targets are this
  trainer's, trainer/model/README.md); the mask head gets each box filled as its mask.
- retinanet_R_50_FPN: loss_cls (sigmoid focal loss over the anchors the matcher does not
  ignore) and loss_box_reg (Base-RetinaNet's smooth L1 at beta 0, i.e. L1, on the foreground),
  both divided by the foreground count's moving average, which on a model's first step is
  0.9 * 100 + 0.1 * count. RetinaNet samples nothing, so they are exact functions of the
  weights, images and boxes.

- mask_rcnn_R_50_FPN, mask_rcnn_R_101_C4, faster_rcnn_R_50_FPN, keypoint_rcnn_R_50_FPN: every
  loss term of the standard R-CNN under Detectron2's own defaults (loss_rpn_cls, loss_rpn_loc,
  loss_cls, loss_box_reg, and loss_mask or loss_keypoint), with both samplers taking every
  candidate (RPN and ROI BATCH_SIZE_PER_IMAGE 100000), so the losses are exact functions of
  the weights, images and ground truth. Mask models get each box filled as its bitmask
  (Detectron2's BitMasks: aligned RoIAlign >= 0.5 targets); the keypoint model gets the
  detections' keypoints as ground truth, every third one not labelled.

All keep the images' size (INPUT.MIN_SIZE_TRAIN 320, MAX_SIZE_TRAIN 533).

    python scripts/detectron2_train_golden.py --detectron2 /work/d2ref/src \\
        --variant-dir test/data/detectron2/cascade_mask_rcnn_R_50_FPN

Writes into the variant dir: train_config.yaml, train_targets.json ({image file name: {boxes,
classes (0-based), and keypoints (G x K x [x, y, v]) for keypoint models}}) and
train_losses.json ({loss name: value}).
"""
import argparse
import json
import os
import sys

import numpy as np

VARIANTS = {
    "cascade_mask_rcnn_R_50_FPN": {
        "images": ["synthetic_0_h320_w427.png", "synthetic_2_h320_w500.png"],
        "boxes_per_image": 4,
        "losses": [f"{name}_stage{s}" for s in range(3) for name in ("loss_cls", "loss_box_reg")],
        "config": {"MODEL.ROI_HEADS.BATCH_SIZE_PER_IMAGE": 100000, "MODEL.ROI_BOX_HEAD.SMOOTH_L1_BETA": 1.0 / 9},
        "box_masks": True,
    },
    # Every loss of the standard R-CNNs under Detectron2's defaults (L1 box losses at beta 0,
    # the RPN's losses over BATCH_SIZE_PER_IMAGE x images, binary mask targets), with every
    # candidate taken by both samplers: 100000 anchors per image (at most 50000 positives)
    # exceed every anchor of these images, 100000 RoIs (25000 positives) every proposal.
    **{name: {
        "images": ["synthetic_0_h320_w427.png", "synthetic_2_h320_w500.png"],
        "boxes_per_image": 4,
        "losses": losses,
        "config": {"MODEL.RPN.BATCH_SIZE_PER_IMAGE": 100000, "MODEL.ROI_HEADS.BATCH_SIZE_PER_IMAGE": 100000},
        "box_masks": masks,
        "keypoints": keypoints,
    } for name, losses, masks, keypoints in [
        ("mask_rcnn_R_50_FPN", ["loss_rpn_cls", "loss_rpn_loc", "loss_cls", "loss_box_reg", "loss_mask"], True, False),
        ("mask_rcnn_R_101_C4", ["loss_rpn_cls", "loss_rpn_loc", "loss_cls", "loss_box_reg", "loss_mask"], True, False),
        ("faster_rcnn_R_50_FPN", ["loss_rpn_cls", "loss_rpn_loc", "loss_cls", "loss_box_reg"], False, False),
        ("keypoint_rcnn_R_50_FPN", ["loss_rpn_cls", "loss_rpn_loc", "loss_cls", "loss_box_reg", "loss_keypoint"],
         False, True),
    ]},
    "retinanet_R_50_FPN": {
        "images": ["synthetic_1_h427_w320.png", "synthetic_2_h320_w500.png"],
        "boxes_per_image": 5,
        "losses": ["loss_cls", "loss_box_reg"],
        "config": {},
        "box_masks": False,
    },
}


def box_masks(boxes, height, width):
    """Each box filled (uint8 G x H x W): masks for a mask head, which these losses ignore."""
    import torch

    masks = torch.zeros(len(boxes), height, width, dtype=torch.uint8)
    for i, (x1, y1, x2, y2) in enumerate(boxes):
        masks[i, int(round(y1)):int(round(y2)), int(round(x1)):int(round(x2))] = 1
    return masks


def visible_keypoints(detected):
    """Ground-truth keypoints from detected ones (x, y, score): every third one (by instance
    and keypoint index) marked not labelled (v 0), the others visible (v 2), so that the loss
    sees both and keypoints outside their box."""
    return [[[x, y, 0.0 if (g + k) % 3 == 0 else 2.0] for k, (x, y, _) in enumerate(points)]
            for g, points in enumerate(detected)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--detectron2", required=True)
    parser.add_argument("--variant-dir", required=True)
    args = parser.parse_args()
    variant_name = os.path.basename(os.path.normpath(args.variant_dir))
    if variant_name not in VARIANTS:
        sys.exit(f"--variant-dir {args.variant_dir}: no training config for {variant_name!r}; "
                 f"known: {', '.join(VARIANTS)}")
    variant = VARIANTS[variant_name]
    sys.path.insert(0, os.path.abspath(args.detectron2))
    import torch
    from PIL import Image
    from detectron2.checkpoint import DetectionCheckpointer
    from detectron2.config import get_cfg
    from detectron2.modeling import build_model
    from detectron2.structures import BitMasks, Boxes, Instances, Keypoints
    from detectron2.utils.events import EventStorage

    torch.set_num_threads(1)
    cfg = get_cfg()
    cfg.merge_from_file(os.path.join(args.variant_dir, "config.yaml"))
    cfg.MODEL.DEVICE = "cpu"
    cfg.INPUT.MIN_SIZE_TRAIN = (320,)
    cfg.INPUT.MAX_SIZE_TRAIN = 533
    cfg.MODEL.WEIGHTS = ""
    cfg.merge_from_list([item for pair in variant["config"].items() for item in pair])
    with open(os.path.join(args.variant_dir, "train_config.yaml"), "w") as handle:
        handle.write(cfg.dump())

    expected = json.load(open(os.path.join(args.variant_dir, "expected.json")))
    images_dir = os.path.join(args.variant_dir, "..", "images")
    inputs, targets = [], {}
    count = variant["boxes_per_image"]
    for name in variant["images"]:
        rgb = np.asarray(Image.open(os.path.join(images_dir, name)).convert("RGB"))
        height, width = rgb.shape[:2]
        boxes = expected[name]["boxes"][:count]
        classes = expected[name]["classes"][:count]
        targets[name] = {"boxes": boxes, "classes": classes}
        instances = Instances((height, width))
        instances.gt_boxes = Boxes(torch.tensor(boxes, dtype=torch.float32))
        instances.gt_classes = torch.tensor(classes, dtype=torch.int64)
        if variant["box_masks"]:
            instances.gt_masks = BitMasks(box_masks(boxes, height, width).bool())
        if variant.get("keypoints"):
            points = visible_keypoints(expected[name]["keypoints"][:count])
            targets[name]["keypoints"] = points
            instances.gt_keypoints = Keypoints(torch.tensor(points, dtype=torch.float32))
        bgr = np.ascontiguousarray(rgb[:, :, ::-1].transpose(2, 0, 1)).astype(np.float32)
        inputs.append({"image": torch.from_numpy(bgr), "instances": instances})

    model = build_model(cfg)
    DetectionCheckpointer(model).load(os.path.join(args.variant_dir, "model_final.pth"))
    model.train()
    with EventStorage(), torch.no_grad():
        losses = model(inputs)
    result = {name: float(losses[name]) for name in variant["losses"]}
    with open(os.path.join(args.variant_dir, "train_targets.json"), "w") as handle:
        json.dump(targets, handle)
    with open(os.path.join(args.variant_dir, "train_losses.json"), "w") as handle:
        json.dump(result, handle, indent=1)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
