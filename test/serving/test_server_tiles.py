"""Tiled inference through the server over real HTTP on 127.0.0.1 (issue 26): the custom
attributes tile_size / tile_overlap / tile_full_image, the MRCNN_TILE_* defaults, and the 400 for
invalid tile values, with a model that detects shapes (test/trainer/model/shapes_model.py).
The server's tiled detections must equal `trainer predict --tile-size ...` on the same image
(both on one intra-op thread, as test_server_matches_trainer_predict.py explains)."""
import json
import os
import pathlib
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "test" / "trainer" / "model"))
import shapes_canvas  # noqa: E402
import shapes_model  # noqa: E402

BUILD = shapes_model.BUILD
HEADER = "X-Amzn-SageMaker-Custom-Attributes"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tiles")
    model = shapes_model.trained_shapes_model(iterations=150)
    rng = np.random.default_rng(11)
    img, _ = shapes_canvas.draw(640, 384, shapes_canvas.grid_shapes(640, 384, 24, (16, 48), rng), rng)
    shapes_canvas.write(tmp / "canvas.png", img)
    return tmp, model


def predict(workdir, *flags):
    tmp, model = workdir
    out = tmp / "predict.json"
    subprocess.run([str(BUILD / "bin" / "trainer"), "predict", "--model-dir", str(model), "--images",
                    str(tmp / "canvas.png"), "--output", str(out), "--threads", "1", "--max-detections", "300",
                    *flags], check=True, capture_output=True)
    return json.loads(out.read_text())


class Server:
    def __init__(self, workdir, env=None):
        tmp, model = workdir
        port_file = tmp / "port"
        port_file.unlink(missing_ok=True)
        self.proc = subprocess.Popen([str(BUILD / "bin" / "server"), "--host", "127.0.0.1", "--port", "0",
                                      "--port-file", str(port_file), "--model-dir", str(model), "--predictor",
                                      "model", "--max-batch", "1", "--num-threads", "1", "--workers", "1",
                                      "--max-detections", "300"],
                                     env={**os.environ, **(env or {})}, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE)
        deadline = time.time() + 300
        self.url = None
        while self.url is None or not self.ping():
            assert self.proc.poll() is None, self.proc.stderr.read().decode()
            assert time.time() < deadline, "server never became ready"
            if self.url is None and port_file.exists():
                self.url = f"http://127.0.0.1:{int(port_file.read_text())}"
            time.sleep(0.1)

    def ping(self):
        try:
            with urllib.request.urlopen(self.url + "/ping", timeout=5) as reply:
                return reply.status == 200
        except OSError:
            return False

    def invoke(self, body, attributes=None):
        headers = {"Content-Type": "image/png"}
        if attributes is not None:
            headers[HEADER] = attributes
        request = urllib.request.Request(self.url + "/invocations", data=body, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=600) as reply:
                return reply.status, json.loads(reply.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(timeout=60) == 0


def same_detections(served, predicted, may_be_empty=False):
    """may_be_empty: for the untiled canvas, whose 16-48 px shapes shrink to a few pixels at
    the model's 128 px input; a 150-iteration model finds none or a few at scores near the
    threshold, so only the tiled comparisons are sure to compare detections."""
    assert len(served["detections"]) == len(predicted)
    assert may_be_empty or len(predicted) > 0
    for got, want in zip(served["detections"], predicted):
        assert got["category_id"] == want["category_id"]
        assert got["score"] == pytest.approx(want["score"], abs=1e-6)
        x, y, w, h = want["bbox"]
        assert got["box"] == pytest.approx([x, y, x + w, y + h], abs=1e-3)
        assert got["mask"]["size"] == want["segmentation"]["size"] == [384, 640]
        assert got["mask"]["counts"] == want["segmentation"]["counts"]


def test_custom_attributes_choose_tiling_per_request(workdir):
    tmp, _ = workdir
    body = (tmp / "canvas.png").read_bytes()
    tiled = predict(workdir, "--tile-size", "128", "--tile-overlap", "0.4")
    tiled_full = predict(workdir, "--tile-size", "128", "--tile-overlap", "0.4", "--tile-full-image")
    untiled = predict(workdir)
    assert len(tiled) > 2 * len(untiled)  # tiles find the small shapes
    server = Server(workdir)
    try:
        status, served = server.invoke(body, "tile_size=128,tile_overlap=0.4")
        assert status == 200
        same_detections(served, tiled)
        status, served = server.invoke(body, "tile_size=128, tile_overlap=0.4, tile_full_image=true, trace=abc")
        assert status == 200  # keys that are not ours stay the caller's
        same_detections(served, tiled_full)
        status, served = server.invoke(body)  # off by default
        assert status == 200
        same_detections(served, untiled, may_be_empty=True)
        for attributes, key in (("tile_size=abc", "tile_size"), ("tile_size=-128", "tile_size"),
                                ("tile_size=128,tile_overlap=0.95", "tile_overlap"),
                                ("tile_overlap=x", "tile_overlap"), ("tile_full_image=yes", "tile_full_image")):
            status, error = server.invoke(body, attributes)
            assert status == 400, attributes
            assert error["error"] == "bad_custom_attributes"
            assert key in error["detail"], error
    finally:
        server.stop()


def test_environment_sets_the_default_and_a_request_can_turn_it_off(workdir):
    tmp, _ = workdir
    body = (tmp / "canvas.png").read_bytes()
    tiled = predict(workdir, "--tile-size", "128", "--tile-overlap", "0.4")
    untiled = predict(workdir)
    server = Server(workdir, {"MRCNN_TILE_SIZE": "128", "MRCNN_TILE_OVERLAP": "0.4"})
    try:
        status, served = server.invoke(body)
        assert status == 200
        same_detections(served, tiled)
        status, served = server.invoke(body, "tile_size=0")
        assert status == 200
        same_detections(served, untiled, may_be_empty=True)
    finally:
        server.stop()


def test_invalid_tile_environment_stops_the_server(workdir):
    _, model = workdir
    for env in ({"MRCNN_TILE_SIZE": "-1"}, {"MRCNN_TILE_OVERLAP": "0.95"}, {"MRCNN_TILE_SIZE": "big"}):
        done = subprocess.run([str(BUILD / "bin" / "server"), "--host", "127.0.0.1", "--port", "0",
                               "--model-dir", str(model)], env={**os.environ, **env}, capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 2, (env, done.stderr)
        assert next(iter(env)) in done.stderr
