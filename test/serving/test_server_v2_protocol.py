"""The Open Inference Protocol (KServe V2) routes of the real server on 127.0.0.1, driven by
tritonclient (Triton's own HTTP client) and by raw HTTP (docs/contract.md, "Open Inference
Protocol"):

- the golden Detectron2 model dirs (test/data/detectron2: a Mask R-CNN, a Faster R-CNN and a
  Keypoint R-CNN) answer /v2/models/model/infer on a JPEG with exactly the detections
  /invocations answers for it: boxes, scores, labels, classes, masks (RLE), keypoints; binary
  and JSON tensors, and two images in one request (padded, num_detections);
- health, readiness and metadata; 503 before the model is warm;
- bad requests get 400 or 404 with {"error": ...}, and the server keeps serving;
- UINT8 pixels in, UINT8 masks out; a multi-model endpoint's models by their names; /metrics
  counts the routes; a SIGTERM drain finishes an infer in flight.
The statistics predictor (serving/models/image_statistics_predictor.h) keeps the protocol
tests fast where no model is needed."""
import base64
import io
import json
import pathlib
import re
import signal
import threading
import time
import urllib.error
import urllib.request

import numpy as np
import pytest
import tritonclient.http as triton
from PIL import Image
from served_model import ModelServer

ROOT = pathlib.Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "test" / "data" / "detectron2"
PNGS = sorted((GOLDEN / "images").glob("*.png"))[:2]


def jpeg_bytes(png: pathlib.Path) -> bytes:
    out = io.BytesIO()
    Image.open(png).convert("RGB").save(out, "JPEG", quality=95)
    return out.getvalue()


def http(server, method, path, body=None, headers=None):
    """(status, headers, body bytes) of one request, error statuses included."""
    request = urllib.request.Request(server.url + path, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=600) as reply:
            return reply.status, reply.headers, reply.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def client(server):
    return triton.InferenceServerClient(server.url.removeprefix("http://"), network_timeout=600.0,
                                        connection_timeout=600.0)


def infer_images(server, images, binary=True, parameters=None, model="model"):
    """tritonclient's infer of encoded images as one BYTES [N] input; the InferResult."""
    tensor = triton.InferInput("image", [len(images)], "BYTES")
    if binary:
        tensor.set_data_from_numpy(np.array(images, dtype=np.object_), binary_data=True)
    else:  # JSON: the base64 of each file
        tensor.set_data_from_numpy(np.array([base64.b64encode(i) for i in images], dtype=np.object_),
                                   binary_data=False)
    return client(server).infer(model, [tensor], parameters=parameters)


def as_detections(result, model_outputs, image=None):
    """The /invocations form of one image's V2 outputs (image: its index when batched)."""
    count = int(result.as_numpy("num_detections")[0 if image is None else image])
    pick = (lambda a: a[:count]) if image is None else (lambda a: a[image][:count])
    boxes, scores = pick(result.as_numpy("boxes")), pick(result.as_numpy("scores"))
    labels, classes = pick(result.as_numpy("labels")), pick(result.as_numpy("classes"))
    detections = []
    for i in range(count):
        item = {"box": boxes[i].tolist(), "label": classes[i].decode(), "category_id": int(labels[i]),
                "score": float(scores[i])}
        if "masks" in model_outputs:
            item["mask"] = json.loads(pick(result.as_numpy("masks"))[i])
        if "keypoints" in model_outputs:
            item["keypoints"] = pick(result.as_numpy("keypoints"))[i].tolist()
        detections.append(item)
    return detections


def assert_same(v2, invocations):
    assert len(v2) == len(invocations) > 0
    for got, want in zip(v2, invocations):
        assert got["category_id"] == want["category_id"] and got["label"] == want["label"]
        assert got["score"] == pytest.approx(want["score"], abs=1e-6)
        assert got["box"] == pytest.approx(want["box"], abs=1e-4)
        assert got.get("mask") == want.get("mask")
        if "keypoints" in want:
            flat = [v for point in got["keypoints"] for v in point]
            assert len(got["keypoints"]) == len(want["keypoints"]) > 0
            assert flat == pytest.approx([v for point in want["keypoints"] for v in point], abs=1e-4)
        else:
            assert "keypoints" not in got


@pytest.mark.parametrize("model_dir", ["mask_rcnn_R_50_FPN", "faster_rcnn_R_50_FPN", "keypoint_rcnn_R_50_FPN"])
def test_infer_on_a_jpeg_answers_what_invocations_answers(model_dir, tmp_path):
    jpegs = [jpeg_bytes(png) for png in PNGS]
    with ModelServer(GOLDEN / model_dir, tmp_path, "--precision", "fp32") as server:
        metadata = client(server).get_model_metadata("model")
        outputs = [o["name"] for o in metadata["outputs"]]
        assert ("masks" in outputs) == (model_dir == "mask_rcnn_R_50_FPN")
        assert ("keypoints" in outputs) == (model_dir == "keypoint_rcnn_R_50_FPN")
        wanted = []
        for jpeg in jpegs:
            status, answer = server.invoke_json(jpeg, "image/jpeg")
            assert status == 200, answer
            wanted.append(answer["detections"])
        for jpeg, want in zip(jpegs, wanted):
            assert_same(as_detections(infer_images(server, [jpeg]), outputs), want)
            assert_same(as_detections(infer_images(server, [jpeg], binary=False), outputs), want)
        both = infer_images(server, jpegs)  # one request, two images: [2, M, ...] padded
        assert both.as_numpy("boxes").shape[0] == 2
        for i, want in enumerate(wanted):
            assert_same(as_detections(both, outputs, image=i), want)


def statistics_model(tmp_path, **settings):
    model = tmp_path / "model"
    model.mkdir(exist_ok=True)
    (model / "statistics_predictor.json").write_text(json.dumps(settings))
    return model


def png(width=64, height=48, seed=0):
    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 60, size=(height, width, 3), dtype=np.uint8)
    pixels[8:30, 10:40] = (30, 220, 40)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, "PNG")
    return out.getvalue(), pixels


def test_health_metadata_and_readiness(tmp_path):
    model = statistics_model(tmp_path, load_delay_ms=1500)
    with ModelServer(model, tmp_path, "--model_name", "shapes", predictor="statistics", wait_ready=False) as server:
        while http(server, "GET", "/v2/health/live")[0] != 200:
            time.sleep(0.05)
        status, _, body = http(server, "GET", "/v2/health/ready")
        assert (status, json.loads(body)) == (503, {"ready": False})  # loading, as /ping
        assert http(server, "GET", "/v2/models/shapes/ready")[0] == 503
        assert http(server, "POST", "/v2/models/shapes/infer", b"{}")[0] == 503
        while not server.ping():
            time.sleep(0.05)
        triton_client = client(server)
        assert triton_client.is_server_live() and triton_client.is_server_ready()
        assert triton_client.is_model_ready("shapes") and triton_client.is_model_ready("shapes", "1")
        assert not triton_client.is_model_ready("shapes", "2")
        assert json.loads(http(server, "GET", "/v2/health/live")[2]) == {"live": True}
        assert json.loads(http(server, "GET", "/v2/health/ready")[2]) == {"ready": True}
        assert json.loads(http(server, "GET", "/v2/models/shapes/ready")[2]) == {"name": "shapes", "ready": True}
        server_metadata = triton_client.get_server_metadata()
        assert "binary_tensor_data" in server_metadata["extensions"]
        assert server_metadata["name"] and server_metadata["version"]
        metadata = triton_client.get_model_metadata("shapes", "1")
        assert metadata["name"] == "shapes" and metadata["versions"] == ["1"]
        assert metadata["inputs"] == [{"name": "image", "datatype": "BYTES", "shape": [-1]},
                                      {"name": "image_rgb", "datatype": "UINT8", "shape": [-1, -1, -1, 3]}]
        assert {o["name"]: (o["datatype"], o["shape"]) for o in metadata["outputs"]} == {
            "boxes": ("FP32", [-1, 4]), "scores": ("FP32", [-1]), "labels": ("INT64", [-1]),
            "classes": ("BYTES", [-1]), "masks": ("BYTES", [-1]), "num_detections": ("INT64", [-1])}


def raw_infer(server, header: dict, binary=b"", path="/v2/models/model/infer", length_name=None):
    """POST a JSON header (+ binary tensors with Inference-Header-Content-Length, whose name
    may be spelled another way); (status, JSON header of the answer)."""
    text = json.dumps(header).encode()
    headers = {"Content-Type": "application/octet-stream" if binary else "application/json"}
    if binary:
        headers[length_name or "Inference-Header-Content-Length"] = str(len(text))
    status, reply_headers, body = http(server, "POST", path, text + binary, headers)
    length = reply_headers.get("Inference-Header-Content-Length")
    return status, json.loads(body[:int(length)] if length else body)


def bytes_input(images, name="image", datatype="BYTES", shape=None):
    blob = b"".join(len(i).to_bytes(4, "little") + i for i in images)
    tensor = {"name": name, "datatype": datatype, "shape": shape or [len(images)],
              "parameters": {"binary_data_size": len(blob)}}
    return tensor, blob


def test_bad_requests_get_400_or_404_and_the_server_keeps_serving(tmp_path):
    image, _ = png()
    good_tensor, good_blob = bytes_input([image])
    with ModelServer(statistics_model(tmp_path), tmp_path, predictor="statistics") as server:
        def still_serves():
            status, answer = raw_infer(server, {"inputs": [good_tensor]}, good_blob)
            assert status == 200 and answer["outputs"], answer

        still_serves()
        status, answer = raw_infer(server, {"inputs": [good_tensor]}, good_blob, length_name="inference-header-content-length")
        assert status == 200, answer  # the header's name in any case
        bad = {
            "bad JSON": (b"{not json", None),
            "wrong datatype": (json.dumps({"inputs": [{**good_tensor, "datatype": "FP32"}]}).encode(), good_blob),
            "wrong shape": (json.dumps({"inputs": [{**good_tensor, "shape": [1, 2]}]}).encode(), good_blob),
            "truncated binary": (json.dumps({"inputs": [good_tensor]}).encode(), good_blob[:-10]),
            "size mismatch": (json.dumps({"inputs": [{**good_tensor, "parameters": {"binary_data_size": 3}}]}).encode(),
                              good_blob),
            "count mismatch": (json.dumps({"inputs": [{**good_tensor, "shape": [2]}]}).encode(), good_blob),
            "not an image": (json.dumps({"inputs": [{"name": "image", "datatype": "BYTES", "shape": [1],
                                                     "data": [base64.b64encode(b"hello").decode()]}]}).encode(), None),
            "bad parameter": (json.dumps({"parameters": {"score_threshold": 2}, "inputs": [good_tensor]}).encode(),
                              good_blob),
            "unknown output": (json.dumps({"inputs": [good_tensor], "outputs": [{"name": "logits"}]}).encode(),
                               good_blob),
        }
        for what, (header, blob) in bad.items():
            headers = {"Content-Type": "application/json"}
            if blob is not None:
                headers["Inference-Header-Content-Length"] = str(len(header))
            status, _, body = http(server, "POST", "/v2/models/model/infer", header + (blob or b""), headers)
            assert status == 400, (what, body)
            assert isinstance(json.loads(body)["error"], str), (what, body)
            still_serves()
        for path in ["/v2/models/other/infer", "/v2/models/model/versions/2/infer"]:
            status, _, body = http(server, "POST", path, json.dumps({"inputs": [good_tensor]}).encode() + good_blob,
                                   {"Inference-Header-Content-Length": str(len(json.dumps({"inputs": [good_tensor]})))})
            assert status == 404 and "error" in json.loads(body), (path, body)
        for path in ["/v2/models/other", "/v2/models/other/ready", "/v2/nothing"]:
            assert http(server, "GET", path)[0] == 404, path
        with pytest.raises(triton.InferenceServerException):
            client(server).get_model_metadata("other")
        still_serves()
        metrics = http(server, "GET", "/metrics")[2].decode()
        infer_200 = re.search(r'mrcnn_http_requests_total\{method="POST",route="/v2/models/\{name\}/infer",'
                              r'code="200"\} (\d+)', metrics)
        infer_400 = re.search(r'mrcnn_http_requests_total\{method="POST",route="/v2/models/\{name\}/infer",'
                              r'code="400"\} (\d+)', metrics)
        assert infer_200 and int(infer_200.group(1)) == len(bad) + 3, metrics
        assert infer_400 and int(infer_400.group(1)) == len(bad), metrics
        assert '"/v2/models/{name}/versions/{version}/infer",code="404"} 1' in metrics


def test_pixels_in_and_pixel_masks_out_agree_with_the_encoded_image(tmp_path):
    image, pixels = png(seed=3)
    with ModelServer(statistics_model(tmp_path), tmp_path, predictor="statistics") as server:
        status, invocation = server.invoke_json(image, "image/png")
        assert status == 200 and invocation["detections"]
        tensor = triton.InferInput("image_rgb", list(pixels.shape), "UINT8")
        tensor.set_data_from_numpy(pixels, binary_data=True)
        requested = [triton.InferRequestedOutput(name, binary_data=name != "classes")
                     for name in ("boxes", "scores", "labels", "classes", "masks", "num_detections")]
        result = client(server).infer("model", [tensor], outputs=requested, parameters={"masks": "uint8"})
        masks = result.as_numpy("masks")
        assert masks.dtype == np.uint8 and masks.shape == (len(invocation["detections"]), 48, 64)
        rle = as_detections(infer_images(server, [image]), ["masks"])
        assert [d["mask"] for d in rle] == [d["mask"] for d in invocation["detections"]]
        for mask, detection in zip(masks, invocation["detections"]):  # each pixel mask's box is its detection's
            ys, xs = np.nonzero(mask)
            assert [xs.min(), ys.min(), xs.max() + 1, ys.max() + 1] == pytest.approx(detection["box"])
        assert result.as_numpy("scores").tolist() == pytest.approx([d["score"] for d in invocation["detections"]])
        # parameters as the custom attributes: a threshold above every score leaves nothing
        none = infer_images(server, [image], parameters={"score_threshold": 0.999})
        assert none.as_numpy("num_detections").tolist() == [0] and none.as_numpy("boxes").shape == (0, 4)


def test_a_multi_model_endpoint_serves_each_model_by_its_name(tmp_path):
    image, _ = png()
    model = statistics_model(tmp_path)
    with ModelServer(model, tmp_path, "--multi-model", predictor="statistics") as server:
        status, _, body = http(server, "POST", "/models", json.dumps({"model_name": "site-a", "url": str(model)}).encode(),
                               {"Content-Type": "application/json"})
        assert status == 200, body
        assert client(server).is_model_ready("site-a")
        assert not client(server).is_model_ready("site-b")
        assert infer_images(server, [image], model="site-a").as_numpy("num_detections")[0] > 0
        assert http(server, "GET", "/v2/models/site-b")[0] == 404
        assert http(server, "DELETE", "/models/site-a")[0] == 200
        assert http(server, "GET", "/v2/models/site-a/ready")[0] == 404


def test_sigterm_drains_an_infer_in_flight(tmp_path):
    image, _ = png()
    server = ModelServer(statistics_model(tmp_path, image_delay_ms=1500), tmp_path, predictor="statistics")
    answers = []
    worker = threading.Thread(target=lambda: answers.append(infer_images(server, [image])))
    worker.start()
    time.sleep(0.5)
    server.proc.send_signal(signal.SIGTERM)
    worker.join(timeout=60)
    assert server.proc.wait(timeout=60) == 0
    assert answers and answers[0].as_numpy("num_detections")[0] > 0


def test_the_payload_limit_and_the_deadline_hold_for_infer(tmp_path):
    image, _ = png()
    tensor, blob = bytes_input([image])
    model = statistics_model(tmp_path, image_delay_ms=1500)
    with ModelServer(model, tmp_path, "--max-payload-mb", "0.01", "--request-deadline-s", "0.5",
                     predictor="statistics") as server:
        status, answer = raw_infer(server, {"inputs": [tensor]}, blob)
        assert status == 503 and "ms" in answer["error"], answer  # no result within the deadline
        big_tensor, big_blob = bytes_input([bytes(20000)])
        status, _, body = http(server, "POST", "/v2/models/model/infer",
                               json.dumps({"inputs": [big_tensor]}).encode() + big_blob,
                               {"Inference-Header-Content-Length": str(len(json.dumps({"inputs": [big_tensor]})))})
        assert status == 413, body
        assert client(server).is_server_live()
