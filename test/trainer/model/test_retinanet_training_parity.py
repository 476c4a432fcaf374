"""RetinaNet trains as Detectron2 does (issue 52): the golden RetinaNet checkpoint in training
mode on two golden images with ground truth (test/data/detectron2/retinanet_R_50_FPN/train_*,
written by scripts/detectron2_train_golden.py with Detectron2's own RetinaNet) gives
loss_cls and loss_box_reg as Detectron2 computed them: the same anchors, matcher (IoU
[0.4, 0.5] with low-quality matches), sigmoid focal loss over the anchors not ignored, L1 box
loss (Base-RetinaNet's SMOOTH_L1_LOSS_BETA 0) on the foreground, and the first step's loss
normaliser (0.9 * 100 + 0.1 * the foreground count). RetinaNet samples nothing, so these are
exact functions of the weights, images and boxes."""
import json

import pytest
from golden_training_losses import GOLDEN, training_losses

VARIANT = GOLDEN / "retinanet_R_50_FPN"


def test_retinanet_losses_equal_detectron2s(tmp_path):
    ours = training_losses(VARIANT, tmp_path, box_masks=False)
    expected = json.loads((VARIANT / "train_losses.json").read_text())
    assert sorted(ours) == sorted(expected) == ["loss_box_reg", "loss_cls"], ours
    for name, value in expected.items():
        assert value > 0, (name, value)  # foreground anchors and real work in both losses
        assert ours[name] == pytest.approx(value, rel=1e-4), (name, ours[name], value)
    print({name: (ours[name], value) for name, value in expected.items()})
