"""The standard R-CNNs train as Detectron2 trains: each golden checkpoint in training mode on two
golden images with ground truth (test/data/detectron2/<variant>/train_*, written by
scripts/detectron2_train_golden.py with Detectron2's own GeneralizedRCNN under its defaults)
gives every loss term Detectron2 computed, within 1e-4 relative: the RPN's objectness and L1
box losses over the constant BATCH_SIZE_PER_IMAGE x images, the box head's cross entropy and
L1 box loss over the sampled RoIs, the mask head's loss on binary targets (an aligned RoIAlign
of each bitmask, thresholded at 0.5) and the keypoint head's spatial cross entropy over the
visible keypoints. The configs take every candidate in both samplers, so nothing is random."""
import json

import pytest
from golden_training_losses import GOLDEN, training_losses

# Detectron2's loss names -> ours.
OUR_NAME = {"loss_rpn_cls": "loss_objectness", "loss_rpn_loc": "loss_rpn_box_reg",
            "loss_cls": "loss_classifier", "loss_box_reg": "loss_box_reg", "loss_mask": "loss_mask",
            "loss_keypoint": "loss_keypoint"}

VARIANTS = {
    "mask_rcnn_R_50_FPN": True,
    "mask_rcnn_R_101_C4": True,
    "faster_rcnn_R_50_FPN": False,
    "keypoint_rcnn_R_50_FPN": False,
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_loss_term_equals_detectron2s(variant, tmp_path):
    ours = training_losses(GOLDEN / variant, tmp_path, box_masks=VARIANTS[variant])
    expected = json.loads((GOLDEN / variant / "train_losses.json").read_text())
    assert sorted(ours) == sorted(OUR_NAME[name] for name in expected), (ours, expected)
    for name, value in expected.items():
        assert value > 0, (name, value)  # positives and real work in every term
        assert ours[OUR_NAME[name]] == pytest.approx(value, rel=1e-4), (name, ours[OUR_NAME[name]], value)
    print({name: (ours[OUR_NAME[name]], value) for name, value in expected.items()})
