"""Detectron2's RetinaNet checkpoints in the model zoo's format load whole (issue 52): the
golden RetinaNet (test/data/detectron2/retinanet_R_50_FPN) written as a zoo .pkl (numpy
arrays in a protocol-3 pickle with numpy.core names, as the zoo's files are) fills every
tensor of the model of its config, Detectron2's names (backbone.bottom_up.*,
backbone.fpn_lateral3-5 / fpn_output3-5, backbone.top_block.p6/p7, head.cls_subnet.*,
head.bbox_subnet.*, head.cls_score, head.bbox_pred) all mapped, none skipped; and a model dir
holding that .pkl predicts what the .pth does."""
import json
import os
import pathlib
import subprocess
import sys

import pytest
import torch

REPO = pathlib.Path(__file__).resolve().parents[3]
BUILD = pathlib.Path(os.environ.get("MRCNN_BUILD_DIR", REPO / "build"))
TRAINER = BUILD / "bin" / "trainer"
VARIANT = REPO / "test" / "data" / "detectron2" / "retinanet_R_50_FPN"
IMAGES = sorted((REPO / "test" / "data" / "detectron2" / "images").glob("*.png"))

sys.path.insert(0, str(REPO / "scripts"))
from detectron2_golden import zoo_pickle_bytes  # noqa: E402


@pytest.fixture(scope="module")
def pkl_model_dir(tmp_path_factory):
    if not TRAINER.exists():
        pytest.fail(f"{TRAINER} is not built (set MRCNN_BUILD_DIR)")
    model_dir = tmp_path_factory.mktemp("retinanet_pkl")
    state = torch.load(VARIANT / "model_final.pth", map_location="cpu", weights_only=True)["model"]
    (model_dir / "model_final.pkl").write_bytes(zoo_pickle_bytes(state))
    (model_dir / "config.yaml").write_text((VARIANT / "config.yaml").read_text())
    return model_dir, state


def test_the_zoo_pkl_fills_every_tensor_of_the_retinanet(pkl_model_dir):
    model_dir, state = pkl_model_dir
    run = subprocess.run([str(TRAINER), "inspect-weights", str(model_dir / "model_final.pkl"), "--model-config",
                          str(model_dir / "config.yaml")], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    lines = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    summary = lines[-1]["summary"]
    assert summary["loaded"] == summary["model_tensors"] == len(state) == 301, summary
    assert (summary["shape_skipped"], summary["unknown"], summary["ignored"], summary["missing"]) == (0, 0, 0, 0)
    # Every family of Detectron2's names is in the file (so each was mapped, not absent).
    for prefix in ("backbone.bottom_up.stem.", "backbone.fpn_lateral3.", "backbone.fpn_output5.",
                   "backbone.top_block.p6.", "backbone.top_block.p7.", "head.cls_subnet.6.", "head.bbox_subnet.0.",
                   "head.cls_score.", "head.bbox_pred."):
        assert any(name.startswith(prefix) for name in state), prefix


def predict(model_dir: pathlib.Path, out: pathlib.Path) -> list:
    run = subprocess.run([str(TRAINER), "predict", "--model-dir", str(model_dir), "--images", *map(str, IMAGES),
                          "--output", str(out), "--precision", "fp32", "--threads", "2"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(out.read_text())


def test_a_model_dir_with_the_zoo_pkl_predicts_as_the_pth(pkl_model_dir, tmp_path):
    model_dir, _ = pkl_model_dir
    from_pkl = predict(model_dir, tmp_path / "pkl.json")
    from_pth = predict(VARIANT, tmp_path / "pth.json")
    assert len(from_pth) >= 30
    assert from_pkl == from_pth


def test_import_weights_writes_a_model_dir_that_predicts_as_detectron2s(tmp_path):
    """`trainer import-weights` (what scripts/convert_weights.py runs for Detectron2
    checkpoints) turns the checkpoint and Detectron2's config dump into our model dir; its
    config.yaml (ModelConfig::ToYaml) keeps everything RetinaNet needs, so the imported model
    predicts exactly what the Detectron2 model dir does."""
    out = tmp_path / "imported"
    run = subprocess.run([str(TRAINER), "import-weights", "--checkpoint", str(VARIANT / "model_final.pth"),
                          "--config", str(VARIANT / "config.yaml"), "--output", str(out)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    config = (out / "config.yaml").read_text()
    assert "META_ARCHITECTURE: RetinaNet" in config and "build_retinanet_resnet_fpn_backbone" in config, config
    imported = predict(out, tmp_path / "imported.json")
    assert len(imported) >= 30
    assert imported == predict(VARIANT, tmp_path / "pth.json")
