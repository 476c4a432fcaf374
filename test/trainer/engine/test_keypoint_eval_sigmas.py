"""A keypoint training job's evaluation needs one OKS sigma per keypoint (issue 52):
TEST.KEYPOINT_OKS_SIGMAS empty means COCO's 17, so a 4-keypoint model without sigmas, or with a
wrong count of them, fails its evaluation with output/failure naming the key and the fix (the
count is checked before the evaluation's inference). test_keypoint_job.py runs the good case."""
import json
import shutil

import pytest
from engine_test_job import entrypoint_env, log_path, make_shapes, start_entrypoint
from test_keypoint_job import GOLDEN, SMALL_RUN, narrow_opts, with_corner_keypoints


@pytest.fixture(scope="module")
def keypoint_shapes(tmp_path_factory):
    shapes = make_shapes(tmp_path_factory.mktemp("shapes"), train=4, val=2, seed=12)
    return with_corner_keypoints(shapes, tmp_path_factory.mktemp("keypoint_shapes") / "data")


@pytest.mark.parametrize("sigmas, expected", [
    ("[]", "is empty (COCO's 17 person sigmas) but the model has 4 keypoints"),
    ("[0.05, 0.05, 0.05]", "has 3 sigmas for 4 keypoints"),
], ids=["none", "three"])
def test_a_keypoint_job_without_one_sigma_per_keypoint_fails_naming_the_key(keypoint_shapes, tmp_path, sigmas,
                                                                           expected):
    root = tmp_path / "job"
    (root / "input" / "config").mkdir(parents=True)
    (root / "input" / "data" / "weights").mkdir(parents=True)
    for channel in ("train", "val"):
        (root / "input" / "data" / channel).symlink_to(keypoint_shapes)
    shutil.copy(GOLDEN / "model_final.pth", root / "input" / "data" / "weights" / "model_final.pth")
    run = [o for o in SMALL_RUN if not o.startswith("TEST.KEYPOINT_OKS_SIGMAS")]
    opts = " ".join(["SOLVER.MAX_ITER 2", *narrow_opts(), *run, f"TEST.KEYPOINT_OKS_SIGMAS {sigmas}"])
    (root / "input" / "config" / "hyperparameters.json").write_text(json.dumps({
        "config-file": "COCO-Keypoints/keypoint_rcnn_R_50_FPN_3x.yaml", "opts": opts}))
    proc = start_entrypoint(root, "--master-port", "29591", env=entrypoint_env())
    code = proc.wait(timeout=600)
    out = log_path(root).read_text()
    assert code != 0, out[-3000:]
    failure = (root / "output" / "failure").read_text()
    assert "TEST.KEYPOINT_OKS_SIGMAS" in failure and expected in failure, failure
