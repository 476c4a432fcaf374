#!/usr/bin/env python3
"""The server on one device against the server on another (default: cuda against cpu), both at
fp32, on the same images and model: POST /invocations of each image to each server, then
compare the answers (issue 40: GPU serving gives the CPU path's detections and RLE strings).

Every detection of the reference side scoring >= --min-score must have one on the other side
of the same category with box IoU >= --iou, a score within --score-tol and a mask IoU >=
--mask-iou (masks decoded from the responses' RLE counts strings); per image the counts above
--min-score may differ by --count-tol (a detection near the threshold may cross it). Kernels
sum in other orders on a GPU, so bit-equality is not asked; the share of RLE strings equal
byte for byte is printed. With --exact (two CPU servers: what the CPU-only tests run), every
response must be equal byte for byte.

  python3 scripts/gpu-check/compare_serving.py --server build/bin/server --model-dir MODEL \\
      --images shapes/val/*.png [--devices cpu,cuda]
"""
import argparse
import http.client
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "containers"))
from check_outputs import box_iou, rle_mask_iou  # noqa: E402  (the container test's RLE decoding)


def start(server, model_dir, device, work, env):
    port_file = work / f"{device.replace(':', '_')}-{time.monotonic_ns()}.port"
    log_path = port_file.with_suffix(".log")
    command = [server, "--host", "127.0.0.1", "--port", "0", "--port-file", str(port_file), "--model-dir",
               str(model_dir), "--predictor", "model", "--device", device, "--precision", "fp32"]
    process = subprocess.Popen(command, stdout=open(log_path, "wb"), stderr=subprocess.STDOUT, env=env)
    deadline = time.time() + 300
    while time.time() < deadline and process.poll() is None:
        if port_file.exists():
            port = int(port_file.read_text())
            try:
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                connection.request("GET", "/ping")
                if connection.getresponse().status == 200:
                    return process, port
            except OSError:
                pass
        time.sleep(0.1)
    process.kill()
    process.wait()
    raise SystemExit(f"compare-serving: the {device} server never became ready: {log_path.read_text()[-2000:]}")


def answers(port, images):
    out = []
    for path in images:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        connection.request("POST", "/invocations", body=path.read_bytes(),
                           headers={"Content-Type": "image/png" if path.suffix == ".png" else "image/jpeg",
                                    "X-Amzn-SageMaker-Custom-Attributes": "masks=rle"})
        response = connection.getresponse()
        body = response.read()
        if response.status != 200:
            raise SystemExit(f"compare-serving: {path.name}: HTTP {response.status} {body[:300]!r}")
        out.append(body)
    return out


def compare(reference, other, a):
    """Problems found between two parsed answers of one image, and the matched pairs' figures."""
    problems, figures = [], []
    ref = [d for d in reference["detections"] if d["score"] >= a.min_score]
    oth = [d for d in other["detections"] if d["score"] >= a.min_score]
    if abs(len(ref) - len(oth)) > a.count_tol:
        problems.append(f"{len(ref)} vs {len(oth)} detections >= {a.min_score}")
    for d in ref:
        same = [g for g in other["detections"] if g["category_id"] == d["category_id"]]
        best = max(same, key=lambda g: box_iou(d["box"], g["box"]), default=None)
        if best is None or box_iou(d["box"], best["box"]) < a.iou or abs(best["score"] - d["score"]) > a.score_tol:
            problems.append(f"detection {d['category_id']} {d['box']} score {d['score']:.3f} has no match")
            continue
        mask_iou = rle_mask_iou(d["mask"], best["mask"])
        if mask_iou < a.mask_iou:
            problems.append(f"detection {d['category_id']} {d['box']}: mask IoU {mask_iou:.3f}")
        figures.append((box_iou(d["box"], best["box"]), abs(best["score"] - d["score"]), mask_iou,
                        d["mask"]["counts"] == best["mask"]["counts"]))
    return problems, figures


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--server", required=True)
    p.add_argument("--model-dir", required=True, type=pathlib.Path)
    p.add_argument("--images", required=True, nargs="+", type=pathlib.Path)
    p.add_argument("--devices", default="cpu,cuda", help="REFERENCE,OTHER")
    p.add_argument("--exact", action="store_true", help="every response equal byte for byte")
    p.add_argument("--min-score", type=float, default=0.3)
    p.add_argument("--iou", type=float, default=0.9)
    p.add_argument("--score-tol", type=float, default=0.05)
    p.add_argument("--mask-iou", type=float, default=0.9)
    p.add_argument("--count-tol", type=int, default=1)
    a = p.parse_args()
    devices = a.devices.split(",")
    if len(devices) != 2:
        raise SystemExit("compare-serving: --devices needs REFERENCE,OTHER")
    env = dict(os.environ, NVIDIA_TF32_OVERRIDE="0")  # fp32 means fp32 on the GPU too
    results = []
    with tempfile.TemporaryDirectory() as work:
        for device in devices:
            process, port = start(a.server, a.model_dir, device, pathlib.Path(work), env)
            try:
                results.append(answers(port, a.images))
            finally:
                process.terminate()
                process.wait(timeout=60)
    problems, figures = [], []
    for path, ref_body, other_body in zip(a.images, *results):
        if a.exact:
            if ref_body != other_body:
                problems.append(f"{path.name}: the responses differ")
            continue
        found, numbers = compare(json.loads(ref_body), json.loads(other_body), a)
        problems += [f"{path.name}: {line}" for line in found]
        figures += numbers
    if a.exact:
        print(f"compare-serving: {len(a.images)} images, {devices[0]} vs {devices[1]}: "
              f"{len(a.images) - len(problems)} responses equal byte for byte")
    else:
        equal = sum(1 for f in figures if f[3])
        print(f"compare-serving: {len(a.images)} images, {devices[0]} vs {devices[1]} at fp32; "
              f"{len(figures)} detections >= {a.min_score} matched; "
              f"min box IoU {min((f[0] for f in figures), default=float('nan')):.4f}; "
              f"max |score diff| {max((f[1] for f in figures), default=float('nan')):.4f}; "
              f"min mask IoU {min((f[2] for f in figures), default=float('nan')):.4f}; "
              f"RLE strings equal byte for byte: {equal} of {len(figures)}")
        if not figures and not problems:
            print("compare-serving: no detection above the threshold: nothing was compared")
            return 1
    for line in problems[:20]:
        print(f"compare-serving: {line}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
