"""The zoo's GN, class-agnostic, deformable and Detectron1-Comparisons configs (issue 61) as users run
them: `entrypoint train` by the zoo name for 20 iterations on the shapes data, starting from
the matching golden Detectron2 checkpoint (test/data/detectron2) where one exists and from
scratch where the config trains from scratch; the loss falls, and the model dir it writes serves
over /invocations what `trainer predict` gives. The networks keep the config's structure (norms,
head layers, poolers) at the golden variants' narrow widths so a CPU runs them in seconds."""
import json
import pathlib
import statistics
import sys

import pytest
from engine_test_job import make_shapes
from test_detectron2_zoo_job import SMALL_RUN, job_tree, narrow_opts, run_job

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))
from served_model import assert_same_images, predicted_detections, served_detections  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[3]
GOLDEN = REPO / "test" / "data" / "detectron2"

# zoo name -> (golden variant whose widths it takes, start from its checkpoint, mask head)
CONFIGS = {
    "Misc/mask_rcnn_R_50_FPN_3x_gn.yaml": ("mask_rcnn_R_50_FPN_gn", True, True),
    "Misc/scratch_mask_rcnn_R_50_FPN_3x_gn.yaml": ("mask_rcnn_R_50_FPN_gn", False, True),
    "Misc/scratch_mask_rcnn_R_50_FPN_9x_gn.yaml": ("mask_rcnn_R_50_FPN_gn", False, True),
    "Misc/mask_rcnn_R_50_FPN_1x_cls_agnostic.yaml": ("mask_rcnn_R_50_FPN_cls_agnostic", True, True),
    "Misc/mask_rcnn_R_50_FPN_1x_dconv_c3-c5.yaml": ("mask_rcnn_R_50_FPN_dconv", True, True),
    "Misc/mask_rcnn_R_50_FPN_3x_dconv_c3-c5.yaml": ("mask_rcnn_R_50_FPN_dconv", True, True),
    "Detectron1-Comparisons/mask_rcnn_R_50_FPN_noaug_1x.yaml": ("mask_rcnn_R_50_FPN_noaug", True, True),
    "Detectron1-Comparisons/faster_rcnn_R_50_FPN_noaug_1x.yaml": ("faster_rcnn_R_50_FPN", True, False),
}
ITERATIONS = 20


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    return make_shapes(tmp_path_factory.mktemp("shapes"), train=8, val=4, seed=11)


def losses(root: pathlib.Path) -> list:
    records = [json.loads(line) for line in (root / "output" / "data" / "metrics.jsonl").read_text().splitlines()]
    return [r["total_loss"] for r in records if "total_loss" in r]


@pytest.mark.parametrize("config", list(CONFIGS))
def test_zoo_config_trains_by_its_name_and_its_model_serves(config, shapes, tmp_path):
    variant, from_checkpoint, mask = CONFIGS[config]
    weights = GOLDEN / variant / "model_final.pth" if from_checkpoint else None
    opts = [f"SOLVER.MAX_ITER {ITERATIONS}", "SOLVER.BASE_LR 0.005", *narrow_opts(variant), *SMALL_RUN]
    # The 9x config's 64 images per batch (and its linearly scaled rate) would not fit 8 images.
    opts += ["SOLVER.IMS_PER_BATCH 2", "SOLVER.BASE_LR 0.005"]
    if not from_checkpoint:
        opts.append('MODEL.WEIGHTS ""')
    root = job_tree(tmp_path / "job", shapes, {"config-file": config, "opts": " ".join(opts)}, weights=weights)
    code, out = run_job(root)
    assert code == 0, out[-4000:]
    assert f"[train] iter: {ITERATIONS}/{ITERATIONS}" in out, out[-2000:]
    if from_checkpoint:
        assert "[weights] loaded" in out, out[-3000:]
    trace = losses(root)
    assert len(trace) >= ITERATIONS // 2, trace
    first, last = statistics.mean(trace[:5]), statistics.mean(trace[-5:])
    assert last < first, f"the loss did not fall: {trace}"

    model = root / "model"
    config_yaml = (model / "config.yaml").read_text()
    assert ("MASK_ON: true" in config_yaml) == mask
    images = sorted((shapes / "val").glob("*.png"))[:2]
    flags = ["--score-threshold", "0.0"]
    predicted = predicted_detections(model, images, tmp_path / "pred.json", *flags)
    served = served_detections(model, images, tmp_path, attributes="score_threshold=0.0")
    assert_same_images(served, predicted)
