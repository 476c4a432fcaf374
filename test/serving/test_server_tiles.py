"""Tiled inference through the server over real HTTP on 127.0.0.1 (issue 26): the custom
attributes tile_size / tile_overlap / tile_full_image, the MRCNN_TILE_* defaults, and the 400 for
invalid tile values, with a model that detects shapes (test/trainer/model/shapes_model.py).
The server's tiled detections must equal `trainer predict --tile-size ...` on the same image
(both on one intra-op thread, as test_server_matches_trainer_predict.py explains)."""
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
from served_model import ModelServer, assert_same_detections

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "test" / "trainer" / "model"))
import shapes_canvas  # noqa: E402
import shapes_model  # noqa: E402

BUILD = shapes_model.BUILD


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


def server(workdir, env=None):
    tmp, model = workdir
    return ModelServer(model, tmp, "--workers", "1", "--max-detections", "300", env=env)


def same_detections(served, predicted, may_be_empty=False):
    """may_be_empty: for the untiled canvas, whose 16-48 px shapes shrink to a few pixels at
    the model's 128 px input; a 150-iteration model finds none or a few at scores near the
    threshold, so only the tiled comparisons are sure to compare detections."""
    assert may_be_empty or len(predicted) > 0
    assert all(want["segmentation"]["size"] == [384, 640] for want in predicted)
    assert_same_detections(served["detections"], predicted)


def test_custom_attributes_choose_tiling_per_request(workdir):
    tmp, _ = workdir
    body = (tmp / "canvas.png").read_bytes()
    tiled = predict(workdir, "--tile-size", "128", "--tile-overlap", "0.4")
    tiled_full = predict(workdir, "--tile-size", "128", "--tile-overlap", "0.4", "--tile-full-image")
    untiled = predict(workdir)
    assert len(tiled) > 2 * len(untiled)  # tiles find the small shapes
    with server(workdir) as endpoint:
        status, served = endpoint.invoke_json(body, attributes="tile_size=128,tile_overlap=0.4")
        assert status == 200
        same_detections(served, tiled)
        status, served = endpoint.invoke_json(
            body, attributes="tile_size=128, tile_overlap=0.4, tile_full_image=true, trace=abc")
        assert status == 200  # keys that are not ours stay the caller's
        same_detections(served, tiled_full)
        status, served = endpoint.invoke_json(body)  # off by default
        assert status == 200
        same_detections(served, untiled, may_be_empty=True)
        for attributes, key in (("tile_size=abc", "tile_size"), ("tile_size=-128", "tile_size"),
                                ("tile_size=128,tile_overlap=0.95", "tile_overlap"),
                                ("tile_overlap=x", "tile_overlap"), ("tile_full_image=yes", "tile_full_image")):
            status, error = endpoint.invoke_json(body, attributes=attributes)
            assert status == 400, attributes
            assert error["error"] == "bad_custom_attributes"
            assert key in error["detail"], error


def test_environment_sets_the_default_and_a_request_can_turn_it_off(workdir):
    tmp, _ = workdir
    body = (tmp / "canvas.png").read_bytes()
    tiled = predict(workdir, "--tile-size", "128", "--tile-overlap", "0.4")
    untiled = predict(workdir)
    with server(workdir, {"MRCNN_TILE_SIZE": "128", "MRCNN_TILE_OVERLAP": "0.4"}) as endpoint:
        status, served = endpoint.invoke_json(body)
        assert status == 200
        same_detections(served, tiled)
        status, served = endpoint.invoke_json(body, attributes="tile_size=0")
        assert status == 200
        same_detections(served, untiled, may_be_empty=True)


def test_invalid_tile_environment_stops_the_server(workdir):
    _, model = workdir
    for env in ({"MRCNN_TILE_SIZE": "-1"}, {"MRCNN_TILE_OVERLAP": "0.95"}, {"MRCNN_TILE_SIZE": "big"}):
        done = subprocess.run([str(BUILD / "bin" / "server"), "--host", "127.0.0.1", "--port", "0",
                               "--model-dir", str(model)], env={**os.environ, **env}, capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 2, (env, done.stderr)
        assert next(iter(env)) in done.stderr
