#!/usr/bin/env python3
"""The Python peer for bench_serving.py: torchvision's maskrcnn_resnet50_fpn with the weights of
a model dir (model.safetensors keys are torchvision's state_dict keys, see
trainer/model/README.md) behind a minimal http.server with the same API as build/bin/server:
GET /ping, POST /invocations (image/jpeg, image/png, application/x-image, application/json
{"image": b64}), options through X-Amzn-SageMaker-Custom-Attributes, JSON detections with
pycocotools RLE masks. This is what a straightforward Python deployment looks like: one model,
requests served one at a time under a lock, no batching.
"""
import argparse
import base64
import io
import json
import os
import pathlib
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pycocotools.mask as mask_util
import torch
import torchvision
import yaml
from PIL import Image
from safetensors.torch import load_file


def load_model(model_dir: pathlib.Path):
    config = yaml.safe_load((model_dir / "config.yaml").read_text()) or {}
    classes = json.loads((model_dir / "classes.json").read_text())
    model_cfg = config.get("MODEL", {})
    input_cfg = config.get("INPUT", {})
    min_size = input_cfg.get("MIN_SIZE_TEST", 800)
    model = torchvision.models.detection.maskrcnn_resnet50_fpn(
        weights=None, weights_backbone=None, num_classes=len(classes) + 1,
        min_size=min_size, max_size=input_cfg.get("MAX_SIZE_TEST", 1333),
        box_detections_per_img=100)
    state = load_file(str(model_dir / "model.safetensors"))
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if not k.endswith("num_batches_tracked")]
    if missing or unexpected:
        raise SystemExit(f"{model_dir}/model.safetensors: missing {missing[:5]}, unexpected {unexpected[:5]}")
    eps = model_cfg.get("BACKBONE", {}).get("FROZEN_BN_EPS", 1e-5)
    for module in model.modules():
        if isinstance(module, torchvision.ops.FrozenBatchNorm2d):
            module.eps = eps
    model.eval()
    return model, classes


def parse_attributes(header):
    options = {"score_threshold": 0.05, "max_detections": 100, "masks": True}
    for item in (header or "").split(","):
        if "=" not in item:
            continue
        key, value = (s.strip() for s in item.split("=", 1))
        if key == "score_threshold":
            options["score_threshold"] = float(value)
        elif key == "max_detections":
            options["max_detections"] = int(value)
        elif key == "masks":
            options["masks"] = value == "rle"
    return options


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    model = None
    classes = None
    device = torch.device("cpu")
    lock = threading.Lock()

    def log_message(self, *args):
        pass

    def reply(self, status, body=b"", content_type="application/json", extra=None):
        self.send_response(status)
        if body:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (extra or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def error(self, status, code, detail):
        self.reply(status, json.dumps({"error": code, "detail": detail}).encode())

    def do_GET(self):
        if self.path == "/ping":
            self.reply(200)
        else:
            self.error(404, "not_found", self.path)

    def do_POST(self):
        length = int(self.headers.get("Content-Length", 0))
        body = self.rfile.read(length)
        if self.path != "/invocations":
            return self.error(404, "not_found", self.path)
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        attributes = self.headers.get("X-Amzn-SageMaker-Custom-Attributes")
        try:
            options = parse_attributes(attributes)
            if content_type == "application/json":
                body = base64.b64decode(json.loads(body)["image"])
            elif content_type not in ("image/jpeg", "image/png", "application/x-image"):
                return self.error(415, "unsupported_media_type", content_type)
            image = np.asarray(Image.open(io.BytesIO(body)).convert("RGB"))
        except Exception as e:  # noqa: BLE001 - the reference answers like the server
            return self.error(400, "undecodable_image", str(e))
        tensor = torch.from_numpy(image).to(self.device).permute(2, 0, 1).float().div(255.0)
        with self.lock, torch.inference_mode():
            self.model.roi_heads.score_thresh = options["score_threshold"]
            self.model.roi_heads.detections_per_img = options["max_detections"]
            output = self.model([tensor])[0]
        detections = []
        output = {k: v.cpu() for k, v in output.items()}
        masks = output["masks"][:, 0] > 0.5 if options["masks"] else None
        for i in range(len(output["scores"])):
            label = int(output["labels"][i])
            entry = self.classes[label - 1]
            detection = {"box": [float(v) for v in output["boxes"][i]], "label": entry["name"],
                         "category_id": entry["id"], "score": float(output["scores"][i])}
            if masks is not None:
                rle = mask_util.encode(np.asfortranarray(masks[i].numpy().astype(np.uint8)))
                detection["mask"] = {"size": rle["size"], "counts": rle["counts"].decode("ascii")}
            detections.append(detection)
        result = {"height": image.shape[0], "width": image.shape[1], "detections": detections}
        extra = {"X-Amzn-SageMaker-Custom-Attributes": attributes} if attributes else None
        self.reply(200, json.dumps(result).encode(), extra=extra)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model-dir", required=True, type=pathlib.Path)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--port-file", type=pathlib.Path)
    parser.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: default)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda[:N]: where the model runs (as the server's)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    Handler.model, Handler.classes = load_model(args.model_dir)
    Handler.device = torch.device(args.device)
    Handler.model.to(Handler.device)
    with torch.inference_mode():  # warm-up, like the C++ server before /ping turns 200
        Handler.model([torch.rand(3, 480, 640, device=Handler.device)])
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    if args.port_file:
        partial = args.port_file.with_suffix(".partial")
        partial.write_text(str(server.server_address[1]))
        os.replace(partial, args.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
