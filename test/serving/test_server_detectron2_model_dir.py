"""A Detectron2 model served (issue 51): the golden R101-C4 Mask R-CNN (test/data/detectron2,
written by Detectron2 itself) converted by `scripts/convert_weights.py --checkpoint
model_final.pth --config config.yaml`, and the detectron2-sagemaker model dir as it is
(model_final.pth + config.yaml, no classes.json), both served by `server --predictor model`
over /invocations, answer what `trainer predict` answers on the same model dir: categories,
scores, boxes and RLE masks. One intra-op thread on both sides (see
test_server_matches_trainer_predict.py for why)."""
import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest
from served_model import BUILD, assert_same_images, predicted_detections, served_detections

ROOT = pathlib.Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "test" / "data" / "detectron2"
IMAGES = sorted((GOLDEN / "images").glob("*.png"))[:2]


def served(model_dir: pathlib.Path, workdir: pathlib.Path):
    return served_detections(model_dir, IMAGES, workdir)


def predicted(model_dir: pathlib.Path, workdir: pathlib.Path):
    return predicted_detections(model_dir, IMAGES, workdir / f"predict-{model_dir.name}.json")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    for binary in ("server", "trainer"):
        assert (BUILD / "bin" / binary).exists(), f"{BUILD}/bin/{binary} is missing: build the project first"
    return tmp_path_factory.mktemp("detectron2_serving")


def test_a_converted_detectron2_c4_model_serves_what_predict_answers(workdir):
    variant = GOLDEN / "mask_rcnn_R_101_C4"
    converted = workdir / "converted"
    classes = workdir / "classes.json"
    classes.write_text(json.dumps([{"id": 101 + i, "name": f"part{i}"} for i in range(5)]))
    subprocess.run([sys.executable, str(ROOT / "scripts" / "convert_weights.py"), "--checkpoint",
                    str(variant / "model_final.pth"), "--config", str(variant / "config.yaml"), "--classes", str(classes),
                    "--output", str(converted)], check=True, env=dict(os.environ, MRCNN_BUILD_DIR=str(BUILD)))
    assert {p.name for p in converted.iterdir()} >= {"model.safetensors", "config.yaml", "classes.json"}
    expected = predicted(converted, workdir)
    assert_same_images(served(converted, workdir), expected)
    # The converted dir answers what the Detectron2 dir itself does, with the given ids.
    as_is = predicted(variant, workdir)
    for ours, theirs in zip(expected, as_is):
        assert [d["category_id"] for d in ours] == [101 + d["category_id"] for d in theirs]
        assert [d["score"] for d in ours] == pytest.approx([d["score"] for d in theirs], abs=1e-6)


def test_a_detectron2_sagemaker_model_dir_serves_as_it_is(workdir):
    model_dir = workdir / "model"  # what a detectron2-sagemaker job leaves in SM_MODEL_DIR
    model_dir.mkdir()
    for name in ("model_final.pth", "config.yaml", "last_checkpoint"):
        shutil.copy(GOLDEN / "mask_rcnn_R_50_FPN" / name, model_dir / name)
    assert_same_images(served(model_dir, workdir), predicted(model_dir, workdir))
