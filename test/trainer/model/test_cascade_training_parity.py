"""Cascade R-CNN trains as Detectron2 does (issue 52): the golden cascade checkpoint in
training mode on two golden images with ground truth (test/data/detectron2/
cascade_mask_rcnn_R_50_FPN/train_*, written by scripts/detectron2_train_golden.py with
Detectron2's own CascadeROIHeads) gives every stage's classification and box regression loss
as Detectron2 computed them. The config takes every ROI candidate (no random subsampling), so
the losses fix stage 0's matching, each later stage's boxes, its re-matching at its IoU (0.6,
0.7) and the per-stage normalisation."""
import json

import pytest
from golden_training_losses import GOLDEN, training_losses

VARIANT = GOLDEN / "cascade_mask_rcnn_R_50_FPN"


def test_cascade_stage_losses_equal_detectron2s(tmp_path):
    ours = training_losses(VARIANT, tmp_path, box_masks=True)
    expected = json.loads((VARIANT / "train_losses.json").read_text())
    assert len(expected) == 6
    assert "loss_classifier" not in ours and "loss_box_reg" not in ours, ours
    for name, value in expected.items():
        assert value > 0, (name, value)  # every stage has positives and real work
        assert ours[name] == pytest.approx(value, rel=2e-3), (name, ours[name], value)
    print({name: (ours[name], value) for name, value in expected.items()})
