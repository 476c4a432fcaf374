"""The server's detections equal `trainer predict`'s on the same images and weights.

A random-weight model dir (scripts/convert_weights.py --random-seed, 3 classes so random
scores clear the 0.05 threshold, small input size to keep CPU time low) is run through
`build/bin/trainer predict` and through `build/bin/server --predictor model` (batches of one,
like predict's default), and every detection is compared: category, score, box and the RLE
mask string. Both run with one intra-op thread: the server's default on a CPU is several
single-threaded workers, and a different thread count changes float sums in the last bits
(scores differ by ~1e-6), which is not what this test is about.
"""
import io
import json
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

import numpy as np
import pytest
from PIL import Image

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("MRCNN_BUILD_DIR", ROOT / "build"))


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
    subprocess.run([str(BUILD / "bin" / "trainer"), "predict", "--model-dir", str(workdir / "model"),
                    "--images", *map(str, images), "--output", str(workdir / "predict.json"), "--threads", "1"],
                   check=True, stdout=subprocess.DEVNULL)
    predicted = json.loads((workdir / "predict.json").read_text())

    port_file = workdir / "port"
    server = subprocess.Popen([str(BUILD / "bin" / "server"), "--host", "127.0.0.1", "--port", "0",
                               "--port-file", str(port_file), "--model-dir", str(workdir / "model"),
                               "--predictor", "model", "--max-batch", "1", "--num-threads", "1"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 600
        url = None
        while url is None or not ping(url):
            assert server.poll() is None, server.stderr.read().decode()
            assert time.time() < deadline, "server never became ready"
            if url is None and port_file.exists():
                url = f"http://127.0.0.1:{int(port_file.read_text())}"
            time.sleep(0.1)
        for image_id, path in enumerate(images, start=1):
            request = urllib.request.Request(url + "/invocations", data=path.read_bytes(),
                                             headers={"Content-Type": "image/png"})
            with urllib.request.urlopen(request, timeout=600) as reply:
                served = json.loads(reply.read())["detections"]
            expected = [r for r in predicted if r["image_id"] == image_id]
            assert len(served) == len(expected) > 0
            for got, want in zip(served, expected):
                assert got["category_id"] == want["category_id"]
                assert got["score"] == pytest.approx(want["score"], abs=1e-6)
                x, y, w, h = want["bbox"]
                assert got["box"] == pytest.approx([x, y, x + w, y + h], abs=1e-3)
                assert got["mask"]["size"] == want["segmentation"]["size"]
                assert got["mask"]["counts"] == want["segmentation"]["counts"]
    finally:
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=60) == 0


def ping(url):
    try:
        with urllib.request.urlopen(url + "/ping", timeout=5) as reply:
            return reply.status == 200
    except OSError:
        return False


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
