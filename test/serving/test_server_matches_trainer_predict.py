"""The server's detections equal `trainer predict`'s on the same images and weights.

A random-weight model dir (scripts/convert_weights.py --random-seed, 3 classes so random
scores clear the 0.05 threshold, small input size to keep CPU time low) is run through
`build/bin/trainer predict` and through `build/bin/server --predictor model` (batches of one,
like predict's default), and every detection is compared: category, score, box and the RLE
mask string. Both run with one intra-op thread: the server's default on a CPU is several
single-threaded workers, and a different thread count changes float sums in the last bits
(scores differ by ~1e-6), which is not what this test is about.
"""
import json
import pathlib
import subprocess
import sys
import tempfile

import numpy as np
import pytest
from PIL import Image
from served_model import BUILD, assert_same_images, predicted_detections, served_detections

ROOT = pathlib.Path(__file__).resolve().parents[2]


def synthetic_png(path, seed):
    rng = np.random.default_rng(seed)
    rgb = rng.integers(0, 50, size=(200, 300, 3), dtype=np.uint8)
    for _ in range(4):
        x0, y0 = rng.integers(0, 250), rng.integers(0, 150)
        rgb[y0:y0 + rng.integers(20, 60), x0:x0 + rng.integers(20, 80)] = rng.integers(100, 256, size=3)
    Image.fromarray(rgb).save(path, "PNG")


@pytest.fixture(scope="module")
def workdir():
    for binary in ("server", "trainer"):
        assert (BUILD / "bin" / binary).exists(), f"{BUILD}/bin/{binary} is missing: build the project first"
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        subprocess.run([sys.executable, str(ROOT / "scripts" / "convert_weights.py"), "--random-seed", "0",
                        "--num-classes", "3", "--set", "INPUT.MIN_SIZE_TEST=320",
                        "--set", "INPUT.MAX_SIZE_TEST=480", "--output", str(tmp / "model")],
                       check=True, stdout=subprocess.DEVNULL)
        for i in range(2):
            synthetic_png(tmp / f"image{i}.png", i)
        yield tmp


def test_server_equals_trainer_predict(workdir):
    images = [workdir / "image0.png", workdir / "image1.png"]
    expected = predicted_detections(workdir / "model", images, workdir / "predict.json")
    assert_same_images(served_detections(workdir / "model", images, workdir), expected)


def test_masks_encoded_where_the_model_runs_equal_the_host_encoder(workdir):
    # `--mask-rle device` runs mrcnn::mask_rle_changes where the model runs (on a GPU, what
    # serving does there; here, on the CPU, its CPU twin) and builds each RLE from the change
    # points; `--mask-rle host` encodes the pasted pixels on the host. Same weights and images:
    # the same detections, and every counts string byte for byte.
    images = [str(workdir / "image0.png"), str(workdir / "image1.png")]
    outputs = {}
    for where in ("device", "host"):
        out = workdir / f"predict-{where}.json"
        subprocess.run([str(BUILD / "bin" / "trainer"), "predict", "--model-dir", str(workdir / "model"),
                        "--images", *images, "--output", str(out), "--threads", "1", "--mask-rle", where],
                       check=True, stdout=subprocess.DEVNULL)
        outputs[where] = json.loads(out.read_text())
    assert len(outputs["device"]) == len(outputs["host"]) > 0
    assert all("segmentation" in r for r in outputs["device"])
    assert outputs["device"] == outputs["host"]
    bad = subprocess.run([str(BUILD / "bin" / "trainer"), "predict", "--model-dir", str(workdir / "model"),
                          "--images", *images, "--output", str(workdir / "x.json"), "--mask-rle", "gpu-only"],
                         capture_output=True, text=True)
    assert bad.returncode != 0 and "--mask-rle" in bad.stderr + bad.stdout
