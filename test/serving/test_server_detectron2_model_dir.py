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
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("MRCNN_BUILD_DIR", ROOT / "build"))
GOLDEN = ROOT / "test" / "data" / "detectron2"
IMAGES = sorted((GOLDEN / "images").glob("*.png"))[:2]


def ping(url):
    try:
        with urllib.request.urlopen(url + "/ping", timeout=5) as reply:
            return reply.status == 200
    except OSError:
        return False


def served_detections(model_dir: pathlib.Path, workdir: pathlib.Path):
    port_file = workdir / f"port-{model_dir.name}"
    server = subprocess.Popen([str(BUILD / "bin" / "server"), "--host", "127.0.0.1", "--port", "0",
                               "--port-file", str(port_file), "--model-dir", str(model_dir),
                               "--predictor", "model", "--max-batch", "1", "--num-threads", "1"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 300
        url = None
        while url is None or not ping(url):
            assert server.poll() is None, server.stderr.read().decode()[-3000:]
            assert time.time() < deadline, "server never became ready"
            if url is None and port_file.exists():
                url = f"http://127.0.0.1:{int(port_file.read_text())}"
            time.sleep(0.1)
        answers = []
        for path in IMAGES:
            request = urllib.request.Request(url + "/invocations", data=path.read_bytes(),
                                             headers={"Content-Type": "image/png"})
            with urllib.request.urlopen(request, timeout=300) as reply:
                answers.append(json.loads(reply.read())["detections"])
        return answers
    finally:
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=60) == 0


def predicted_detections(model_dir: pathlib.Path, workdir: pathlib.Path):
    out = workdir / f"predict-{model_dir.name}.json"
    subprocess.run([str(BUILD / "bin" / "trainer"), "predict", "--model-dir", str(model_dir), "--images",
                    *map(str, IMAGES), "--output", str(out), "--threads", "1"], check=True, stdout=subprocess.DEVNULL)
    predicted = json.loads(out.read_text())
    return [[r for r in predicted if r["image_id"] == i] for i in range(1, len(IMAGES) + 1)]


def assert_same(served, expected):
    assert len(served) == len(expected)
    for got_image, want_image in zip(served, expected):
        assert len(got_image) == len(want_image) > 0
        for got, want in zip(got_image, want_image):
            assert got["category_id"] == want["category_id"]
            assert got["score"] == pytest.approx(want["score"], abs=1e-6)
            x, y, w, h = want["bbox"]
            assert got["box"] == pytest.approx([x, y, x + w, y + h], abs=1e-3)
            assert got["mask"]["counts"] == want["segmentation"]["counts"]


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
    expected = predicted_detections(converted, workdir)
    assert_same(served_detections(converted, workdir), expected)
    # The converted dir answers what the Detectron2 dir itself does, with the given ids.
    as_is = predicted_detections(variant, workdir)
    for ours, theirs in zip(expected, as_is):
        assert [d["category_id"] for d in ours] == [101 + d["category_id"] for d in theirs]
        assert [d["score"] for d in ours] == pytest.approx([d["score"] for d in theirs], abs=1e-6)


def test_a_detectron2_sagemaker_model_dir_serves_as_it_is(workdir):
    model_dir = workdir / "model"  # what a detectron2-sagemaker job leaves in SM_MODEL_DIR
    model_dir.mkdir()
    for name in ("model_final.pth", "config.yaml", "last_checkpoint"):
        shutil.copy(GOLDEN / "mask_rcnn_R_50_FPN" / name, model_dir / name)
    assert_same(served_detections(model_dir, workdir), predicted_detections(model_dir, workdir))
