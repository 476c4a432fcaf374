#!/usr/bin/env python3
"""Golden learning-rate schedules from Detectron2 itself: for each case, Detectron2's
build_lr_scheduler (WarmupParamScheduler over fvcore's schedulers, LRMultiplier) on a
one-parameter SGD, stepped as its LRScheduler hook steps it (after each iteration's update),
and the learning rate every iteration ran with, written as change points
[iteration, lr] (the value holds until the next change). The cases are the zoo's 1x and 3x
COCO schedules, the Pascal VOC one, a cosine schedule, and steps inside a linear and a
constant warmup. Checked by test/trainer/engine/test_lr_schedule.cpp. Beside it,
parameter_groups.json: the optimizer's parameter groups on three golden models (checked by
test/trainer/engine/test_zoo_models.cpp).

    python scripts/detectron2_solver_golden.py --detectron2 /work/d2ref/src \\
        --output test/data/detectron2/solver/lr_schedules.json
"""
import argparse
import json
import os
import sys

CASES = {
    "coco_1x": ["SOLVER.BASE_LR", 0.02, "SOLVER.MAX_ITER", 90000, "SOLVER.STEPS", (60000, 80000)],
    "coco_3x": ["SOLVER.BASE_LR", 0.02, "SOLVER.MAX_ITER", 270000, "SOLVER.STEPS", (210000, 250000)],
    "voc": ["SOLVER.BASE_LR", 0.02, "SOLVER.MAX_ITER", 18000, "SOLVER.STEPS", (12000, 16000),
            "SOLVER.WARMUP_ITERS", 100],
    "cosine": ["SOLVER.LR_SCHEDULER_NAME", "WarmupCosineLR", "SOLVER.BASE_LR", 0.01, "SOLVER.MAX_ITER", 1000,
               "SOLVER.WARMUP_ITERS", 200, "SOLVER.BASE_LR_END", 0.0001],
    "step_inside_warmup_constant": ["SOLVER.BASE_LR", 0.01, "SOLVER.MAX_ITER", 400, "SOLVER.STEPS", (50, 300),
                                    "SOLVER.WARMUP_ITERS", 100, "SOLVER.WARMUP_METHOD", "constant",
                                    "SOLVER.WARMUP_FACTOR", 0.25],
    "step_inside_warmup_linear": ["SOLVER.BASE_LR", 0.01, "SOLVER.MAX_ITER", 400, "SOLVER.STEPS", (50, 300),
                                  "SOLVER.WARMUP_ITERS", 100],
}


def schedule(get_cfg, build_lr_scheduler, torch, overrides):
    cfg = get_cfg()
    cfg.merge_from_list(overrides)
    parameter = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([parameter], lr=cfg.SOLVER.BASE_LR)
    scheduler = build_lr_scheduler(cfg, optimizer)
    changes, last = [], None
    for iteration in range(cfg.SOLVER.MAX_ITER):
        lr = optimizer.param_groups[0]["lr"]
        if lr != last:
            changes.append([iteration, lr])
            last = lr
        optimizer.step()
        scheduler.step()
    return changes


# Parameter groups: Detectron2's get_default_optimizer_params (through build_optimizer) on a
# golden variant's model under these SOLVER settings, per (lr, weight decay): how many
# parameters and elements. Trainable parameters only (FREEZE_AT freezes the stem and res2).
GROUP_VARIANTS = ["mask_rcnn_R_50_FPN", "mask_rcnn_R_101_C4", "keypoint_rcnn_R_50_FPN"]
GROUP_CASES = {
    "defaults": [],
    "bias_lr_and_decay": ["SOLVER.BIAS_LR_FACTOR", 2.0, "SOLVER.WEIGHT_DECAY_BIAS", 0.0, "SOLVER.WEIGHT_DECAY", 5e-5],
    "freeze_at_0": ["MODEL.BACKBONE.FREEZE_AT", 0, "SOLVER.WEIGHT_DECAY", 3e-4],
}


def parameter_groups(get_cfg, build_model, build_optimizer, variant_dir, overrides):
    cfg = get_cfg()
    cfg.merge_from_file(variant_dir + "/config.yaml")
    cfg.MODEL.DEVICE = "cpu"
    cfg.MODEL.WEIGHTS = ""
    cfg.merge_from_list(overrides)
    optimizer = build_optimizer(cfg, build_model(cfg))
    groups = {}
    for group in optimizer.param_groups:
        key = (group["lr"], group["weight_decay"])
        entry = groups.setdefault(key, {"lr": key[0], "weight_decay": key[1], "parameters": 0, "elements": 0})
        entry["parameters"] += len(group["params"])
        entry["elements"] += sum(p.numel() for p in group["params"])
    return sorted(groups.values(), key=lambda g: (g["lr"], g["weight_decay"]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--detectron2", required=True)
    parser.add_argument("--output", required=True)
    args = parser.parse_args()
    sys.path.insert(0, args.detectron2)
    import torch
    from detectron2.config import get_cfg
    from detectron2.solver import build_lr_scheduler

    parser_dir = os.path.dirname(os.path.abspath(args.output))
    from detectron2.modeling import build_model
    from detectron2.solver import build_optimizer

    groups = {}
    for variant in GROUP_VARIANTS:
        for name, overrides in GROUP_CASES.items():
            groups[f"{variant}/{name}"] = {
                "variant": variant, "opts": overrides,
                "groups": parameter_groups(get_cfg, build_model, build_optimizer,
                                           os.path.join(parser_dir, "..", variant), overrides)}
    with open(os.path.join(parser_dir, "parameter_groups.json"), "w") as handle:
        json.dump(groups, handle, indent=1)

    result = {}
    for name, overrides in CASES.items():
        opts = [list(v) if isinstance(v, tuple) else v for v in overrides]
        result[name] = {"opts": opts, "changes": schedule(get_cfg, build_lr_scheduler, torch, overrides)}
    with open(args.output, "w") as handle:
        json.dump(result, handle)
    print({name: len(case["changes"]) for name, case in result.items()})


if __name__ == "__main__":
    main()
