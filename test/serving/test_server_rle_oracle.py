"""Oracle test: the server's masks are pycocotools RLE, byte for byte.

Starts build/bin/server with the deterministic statistics predictor (see
serving/image_statistics_predictor.h), sends PNG images with random blobs, and checks each
detection's "counts" against pycocotools.mask.encode of the mask computed here in numpy
from the same rule, and that pycocotools decodes it back to that mask.
"""
import base64
import io
import json
import os
import pathlib
import signal
import subprocess
import tempfile
import time
import urllib.request

import numpy as np
import pycocotools.mask as mask_util
import pytest
from PIL import Image

BUILD = pathlib.Path(os.environ.get("MRCNN_BUILD_DIR", str(pathlib.Path(__file__).resolve().parents[2] / "build")))
SERVER = BUILD / "bin" / "server"


@pytest.fixture(scope="module")
def server():
    assert SERVER.exists(), f"{SERVER} is missing: build the project first (scripts/setup.sh)"
    with tempfile.TemporaryDirectory() as tmp:
        model = pathlib.Path(tmp) / "model"
        model.mkdir()
        (model / "statistics_predictor.json").write_text("{}")
        port_file = pathlib.Path(tmp) / "port"
        process = subprocess.Popen(
            [str(SERVER), "--host", "127.0.0.1", "--port", "0", "--port-file", str(port_file),
             "--model-dir", str(model)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            deadline = time.time() + 20
            while not port_file.exists():
                assert process.poll() is None, process.stderr.read().decode()
                assert time.time() < deadline, "no port file"
                time.sleep(0.01)
            url = f"http://127.0.0.1:{int(port_file.read_text())}"
            while True:
                try:
                    with urllib.request.urlopen(url + "/ping") as reply:
                        if reply.status == 200:
                            break
                except OSError:
                    pass
                assert time.time() < deadline, "never ready"
                time.sleep(0.02)
            yield url
        finally:
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=30) == 0


def expected_detections(rgb):
    """The statistics predictor's rule, in numpy."""
    h, w, _ = rgb.shape
    c = rgb.astype(np.int64)
    y = (299 * c[..., 0] + 587 * c[..., 1] + 114 * c[..., 2]) // 1000
    cells = [(0, h // 2, 0, w // 2), (0, h // 2, w // 2, w), (h // 2, h, 0, w // 2),
             (h // 2, h, w // 2, w)]
    out = []
    for y0, y1, x0, x1 in cells:
        cell = y[y0:y1, x0:x1]
        if cell.size == 0:
            continue
        fg = cell * cell.size > cell.sum()
        if not fg.any():
            continue
        mask = np.zeros((h, w), np.uint8)
        mask[y0:y1, x0:x1] = fg
        ys, xs = np.nonzero(mask)
        score = cell[fg].mean() / 255.0
        out.append((score, [xs.min(), ys.min(), xs.max() + 1, ys.max() + 1], mask))
    out.sort(key=lambda d: -d[0])
    return [d for d in out if d[0] > 0.05]


def post_png(url, rgb, extra_headers=None):
    buffer = io.BytesIO()
    Image.fromarray(rgb).save(buffer, "PNG")
    request = urllib.request.Request(url + "/invocations", data=buffer.getvalue(),
                                     headers={"Content-Type": "image/png", **(extra_headers or {})})
    with urllib.request.urlopen(request) as reply:
        return json.loads(reply.read())


@pytest.mark.parametrize("seed", range(6))
def test_masks_are_pycocotools_rle(server, seed):
    rng = np.random.default_rng(seed)
    h, w = rng.integers(7, 120, size=2)
    rgb = np.zeros((h, w, 3), np.uint8)
    for _ in range(rng.integers(1, 8)):
        x0, y0 = rng.integers(0, w), rng.integers(0, h)
        x1, y1 = x0 + rng.integers(1, w), y0 + rng.integers(1, h)
        rgb[y0:y1, x0:x1] = rng.integers(0, 256, size=3)
    rgb += rng.integers(0, 20, size=rgb.shape, dtype=np.uint8)
    body = post_png(server, rgb)
    assert (body["height"], body["width"]) == (h, w)
    expected = expected_detections(rgb)
    assert len(body["detections"]) == len(expected)
    for got, (score, box, mask) in zip(body["detections"], expected):
        reference = mask_util.encode(np.asfortranarray(mask))
        assert got["mask"]["size"] == [int(h), int(w)]
        assert got["mask"]["counts"] == reference["counts"].decode("ascii")
        decoded = mask_util.decode({"size": got["mask"]["size"],
                                    "counts": got["mask"]["counts"].encode("ascii")})
        np.testing.assert_array_equal(decoded, mask)
        assert got["box"] == [float(v) for v in box]
        assert got["score"] == pytest.approx(score, rel=1e-6)
        # pycocotools' own box of the RLE agrees with the detection box
        x, y, bw, bh = mask_util.toBbox(reference)
        assert [x, y, x + bw, y + bh] == got["box"]


def test_list_form_and_masks_none(server):
    rgb = np.zeros((30, 40, 3), np.uint8)
    rgb[2:9, 3:15] = (10, 20, 250)
    buffer = io.BytesIO()
    Image.fromarray(rgb).save(buffer, "PNG")
    encoded = base64.b64encode(buffer.getvalue()).decode()
    request = urllib.request.Request(
        server + "/invocations", data=json.dumps([{"image": encoded}, {"image": encoded}]).encode(),
        headers={"Content-Type": "application/json",
                 "X-Amzn-SageMaker-Custom-Attributes": "masks=none"})
    with urllib.request.urlopen(request) as reply:
        assert reply.headers["X-Amzn-SageMaker-Custom-Attributes"] == "masks=none"
        predictions = json.loads(reply.read())["predictions"]
    assert len(predictions) == 2
    for prediction in predictions:
        assert [d["label"] for d in prediction["detections"]] == ["blue"]
        assert "mask" not in prediction["detections"][0]
