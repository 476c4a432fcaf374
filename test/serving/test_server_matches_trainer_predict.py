"""The server's detections equal `trainer predict`'s on the same images and weights.

A random-weight model dir (scripts/convert_weights.py --random-seed, 3 classes so random
scores clear the 0.05 threshold, small input size to keep CPU time low) is run through
`build/bin/trainer predict` and through `build/bin/server --predictor model` (batches of one,
like predict's default), and every detection is compared: category, score, box and the RLE
mask string. Both run with one intra-op thread: the server's default on a CPU is several
single-threaded workers, and a different thread count changes float sums in the last bits
(scores differ by ~1e-6), which is not what this test is about.
"""
import pathlib
import subprocess
import sys
import tempfile

import numpy as np
import pytest
from PIL import Image
from served_model import BUILD, assert_same_detections, predicted_detections, served_detections

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
    served = served_detections(workdir / "model", images, workdir)
    assert len(served) == len(expected)
    for got_image, want_image in zip(served, expected):
        assert len(want_image) > 0
        assert_same_detections(got_image, want_image)
