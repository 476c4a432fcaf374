"""CPU latency of one lone request against the engines CPU users export Mask R-CNN to (issue 25):

- ours: the server (`build/bin/server`, one worker, 2 threads), a lone POST /invocations of a
  JPEG over loopback, at MRCNN_SERVING_PRECISION=auto (bf16 where the CPU has native bf16 dot
  products) and at fp32; HTTP, JPEG decoding, RLE and JSON are inside its time;
- torchvision eager `maskrcnn_resnet50_fpn` (the same weights; decoded image in, masks pasted);
- ONNX Runtime on `torch.onnx.export(..., dynamo=False, opset_version=11)` of that model;
- OpenVINO on `openvino.convert_model(model, example_input=...)`, at its default precision (bf16
  on a CPU that has it) and with INFERENCE_PRECISION_HINT f32.

Every engine uses 2 threads; each round runs every engine once, the order rotated round by
round, with `--pause` idle seconds before each request (thread pools that spin after their work
would otherwise charge it to the next engine); medians over the rounds. The weights are torchvision's seeded random ones with the
class scores scaled by 3 (larger scales make hundreds of candidates score exactly 1.0, which
every engine breaks differently). The detections of every engine are checked against
torchvision's: a torchvision detection counts when the engine has one of the same label with
IoU >= 0.9; only those whose score is clear of the score threshold and of the 100th score by
`--margin` are counted (near-ties may swap).

onnxruntime and openvino live in the bench's own environment, never in the product's:

    bash bench/serving/bench_cpu_peers.sh [--rounds 12] [--engines ours,ours-fp32,...]
"""
import argparse
import io
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torchvision
from PIL import Image

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "bench" / "serving"))
import bench_serving  # noqa: E402
import convert_weights  # noqa: E402

THREADS = 2


def make_model(class_scale):
    torch.manual_seed(0)
    model = torchvision.models.detection.maskrcnn_resnet50_fpn(weights=None, weights_backbone=None,
                                                               num_classes=91)
    with torch.no_grad():
        model.roi_heads.box_predictor.cls_score.weight.mul_(class_scale)
    return model.eval()


class SingleImage(torch.nn.Module):
    """The model with one 3xHxW image in and a tuple out, which tracing (OpenVINO) and the
    TorchScript-based ONNX exporter need (the model returns a list of dicts)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, image):
        out = self.model([image])[0]
        return out["boxes"], out["labels"], out["scores"], out["masks"]


def make_jpeg(width, height, seed):
    return bench_serving.make_images(1, width, height, seed=seed)[0]


def as_detections(boxes, labels, scores):
    return {"boxes": np.asarray(boxes, dtype=np.float32).reshape(-1, 4),
            "labels": np.asarray(labels, dtype=np.int64).reshape(-1),
            "scores": np.asarray(scores, dtype=np.float32).reshape(-1)}


class Ours:
    def __init__(self, model_dir, precision, workdir):
        self.name = "ours" if precision == "auto" else f"ours-{precision}"
        port_file = workdir / f"{self.name}.port"
        port_file.unlink(missing_ok=True)  # a previous run's port would be waited on
        env = dict(os.environ, MRCNN_SERVING_PRECISION=precision)
        command = [str(ROOT / os.environ.get("MRCNN_BUILD_DIR", "build") / "bin" / "server"),
                   "--host", "127.0.0.1", "--port", "0", "--port-file", str(port_file),
                   "--model-dir", str(model_dir), "--predictor", "model", "--device", "cpu",
                   "--workers", "1", "--num-threads", str(THREADS), "--request-deadline-s", "600"]
        log = workdir / f"{self.name}.log"
        self.process, self.port = bench_serving.start(command, port_file, log, env=env)
        self.precision = precision_from_log(log) or precision

    def run(self, jpeg, rgb):
        import http.client
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
        start = time.perf_counter()
        connection.request("POST", "/invocations", body=jpeg, headers={
            "Content-Type": "image/jpeg",
            "X-Amzn-SageMaker-Custom-Attributes": "score_threshold=0.05,max_detections=100,masks=rle"})
        response = connection.getresponse()
        payload = response.read()
        elapsed = time.perf_counter() - start
        if response.status != 200:
            raise SystemExit(f"{self.name}: HTTP {response.status}: {payload[:300]!r}")
        found = json.loads(payload)["detections"]
        return elapsed, as_detections([d["box"] for d in found], [d["category_id"] for d in found],
                                      [d["score"] for d in found])

    def close(self):
        self.process.terminate()
        self.process.wait(timeout=30)


def precision_from_log(log):
    for line in pathlib.Path(log).read_text(errors="replace").splitlines():
        if "precision" in line:
            for word in ("bf16", "fp32-fast", "fp32", "fp16"):
                if f"precision {word}" in line or f"precision={word}" in line:
                    return word
    return None


def torch_input(rgb):
    return torch.from_numpy(rgb).permute(2, 0, 1).float().div_(255)


class Torchvision:
    name, precision = "torchvision", "fp32"

    def __init__(self, model):
        self.model = model

    def run(self, jpeg, rgb):
        self.model.eval()  # the exporters may leave it in training mode
        start = time.perf_counter()
        with torch.inference_mode():
            out = self.model([torch_input(rgb)])[0]
            masks = out["masks"] >= 0.5
        elapsed = time.perf_counter() - start
        del masks
        return elapsed, as_detections(out["boxes"], out["labels"], out["scores"])


class OnnxRuntime:
    name, precision = "onnxruntime", "fp32"

    def __init__(self, model, rgb, workdir):
        import onnxruntime
        path = workdir / "maskrcnn.onnx"
        torch.onnx.export(SingleImage(model), (torch_input(rgb),), str(path), dynamo=False, opset_version=11,
                          input_names=["image"], output_names=["boxes", "labels", "scores", "masks"],
                          dynamic_axes={"image": [1, 2]})
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = THREADS
        options.inter_op_num_threads = 1
        self.session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.version = onnxruntime.__version__

    def run(self, jpeg, rgb):
        start = time.perf_counter()
        image = torch_input(rgb).numpy()
        boxes, labels, scores, masks = self.session.run(None, {"image": image})
        masks = masks >= 0.5
        elapsed = time.perf_counter() - start
        return elapsed, as_detections(boxes, labels, scores)


class OpenVino:
    def __init__(self, model, rgb, f32):
        import openvino
        self.name = "openvino-f32" if f32 else "openvino"
        converted = openvino.convert_model(SingleImage(model), example_input=(torch_input(rgb),))
        config = {"INFERENCE_NUM_THREADS": THREADS, "PERFORMANCE_HINT": "LATENCY"}
        if f32:
            config["INFERENCE_PRECISION_HINT"] = "f32"
        self.compiled = openvino.Core().compile_model(converted, "CPU", config)
        hint = self.compiled.get_property("INFERENCE_PRECISION_HINT")
        self.precision = hint.to_string() if hasattr(hint, "to_string") else str(hint)
        self.version = openvino.__version__

    def run(self, jpeg, rgb):
        start = time.perf_counter()
        result = self.compiled([torch_input(rgb).numpy()])
        outputs = [result[o] for o in self.compiled.outputs]
        boxes, labels, scores, masks = outputs[:4]
        masks = masks >= 0.5
        elapsed = time.perf_counter() - start
        return elapsed, as_detections(boxes, labels, scores)


def iou(a, b):
    x1, y1 = np.maximum(a[0], b[:, 0]), np.maximum(a[1], b[:, 1])
    x2, y2 = np.minimum(a[2], b[:, 2]), np.minimum(a[3], b[:, 3])
    inter = np.clip(x2 - x1, 0, None) * np.clip(y2 - y1, 0, None)
    area = (a[2] - a[0]) * (a[3] - a[1]) + (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1]) - inter
    return inter / np.maximum(area, 1e-9)


def agreement(reference, other, threshold, margin):
    """(matched, counted): reference detections clear of the threshold and of the 100th score by
    `margin` that `other` also has (same label, IoU >= 0.9)."""
    scores = reference["scores"]
    floor = threshold + margin
    if len(scores) >= 100:
        floor = max(floor, float(np.sort(scores)[-100]) + margin)
    counted = matched = 0
    for box, label, score in zip(reference["boxes"], reference["labels"], scores):
        if score < floor:
            continue
        counted += 1
        same = other["labels"] == label
        if same.any() and iou(box, other["boxes"][same]).max() >= 0.9:
            matched += 1
    return matched, counted


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--engines", default="ours,ours-fp32,openvino,openvino-f32,onnxruntime,torchvision")
    parser.add_argument("--size", default="640x480", help="WxH of the JPEG")
    parser.add_argument("--class-scale", type=float, default=3.0)
    parser.add_argument("--margin", type=float, default=0.01)
    parser.add_argument("--pause", type=float, default=1.0, help="idle seconds before each timed request")
    parser.add_argument("--out", default=str(ROOT / "bench" / "out" / "cpu_peers"))
    args = parser.parse_args()
    torch.set_num_threads(THREADS)
    width, height = map(int, args.size.split("x"))
    jpeg = make_jpeg(width, height, seed=25)
    rgb = np.asarray(Image.open(io.BytesIO(jpeg)).convert("RGB"))
    model = make_model(args.class_scale)
    workdir = pathlib.Path(args.out)
    workdir.mkdir(parents=True, exist_ok=True)
    model_dir = workdir / "model"
    convert_weights.write_model_dir(convert_weights.normalised_state_dict(model), model_dir,
                                    [{"id": i, "name": f"c{i}"} for i in range(1, 91)],
                                    convert_weights.torchvision_config(90, 1e-5, {}))
    wanted = args.engines.split(",")
    makers = {
        "ours": lambda: Ours(model_dir, "auto", workdir),
        "ours-fp32": lambda: Ours(model_dir, "fp32", workdir),
        "ours-fp32-fast": lambda: Ours(model_dir, "fp32-fast", workdir),
        "ours-bf16": lambda: Ours(model_dir, "bf16", workdir),
        "torchvision": lambda: Torchvision(model),
        "onnxruntime": lambda: OnnxRuntime(model, rgb, workdir),
        "openvino": lambda: OpenVino(model, rgb, f32=False),
        "openvino-f32": lambda: OpenVino(model, rgb, f32=True),
    }
    unknown = [name for name in wanted if name not in makers]
    if unknown:
        raise SystemExit(f"--engines: unknown {unknown}; known: {sorted(makers)}")
    engines, skipped = [], []
    try:
        for name in wanted:
            began = time.perf_counter()
            try:
                engine = makers[name]()
            except ImportError as error:
                # A peer without a wheel for this machine (bench_cpu_peers.sh said which).
                skipped.append(f"{name} ({error})")
                print(f"# {name}: skipped, not installed for {platform.machine()}: {error}", flush=True)
                continue
            engine.run(jpeg, rgb)  # warm-up: first-call allocations, oneDNN primitive creation
            print(f"# {name}: ready in {time.perf_counter() - began:.1f} s, precision {engine.precision}",
                  flush=True)
            engines.append(engine)
        times = {e.name: [] for e in engines}
        detections = {}
        for r in range(args.rounds):
            order = engines[r % len(engines):] + engines[:r % len(engines)]
            for engine in order:
                # Thread pools spin a while after their work (OpenMP, ONNX Runtime, oneTBB):
                # on 2 cores the previous engine's spinning would be charged to the next one.
                time.sleep(args.pause)
                elapsed, found = engine.run(jpeg, rgb)
                times[engine.name].append(elapsed)
                detections[engine.name] = found
            print(f"# round {r + 1}/{args.rounds}: " +
                  ", ".join(f"{e.name} {times[e.name][-1] * 1000:.0f} ms" for e in engines), flush=True)
        report(engines, times, detections, args, width, height, skipped)
    finally:
        for engine in engines:
            if hasattr(engine, "close"):
                engine.close()


def cpu_name():
    """The CPU's model name: /proc/cpuinfo's on x86; on arm64, which lists only part numbers
    there, lscpu's (it names Neoverse-V1, -V2, ...)."""
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        return next(line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name"))
    except (OSError, subprocess.CalledProcessError, StopIteration):
        return platform.processor() or platform.machine()


# The instruction sets that decide which kernels oneDNN, OpenVINO and our fast path take.
ISA_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8",  # x86
             "asimddp", "bf16", "i8mm", "sve", "sve2")  # arm64 (/proc/cpuinfo "Features")


def cpu_isa():
    """The ISA flags of ISA_FLAGS this CPU reports (/proc/cpuinfo's flags or Features), in
    that order, space-separated; "-" when it lists none of them."""
    flags = set()
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith(("flags", "Features")):
                flags.update(line.split(":", 1)[1].split())
                break
    except OSError:
        pass
    return " ".join(f for f in ISA_FLAGS if f in flags) or "-"


def report(engines, times, detections, args, width, height, skipped):
    medians = {name: statistics.median(t) * 1000 for name, t in times.items()}
    cpu = f"{cpu_name()} ({platform.machine()}: {cpu_isa()})"
    print(f"\n# {cpu}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}; "
          f"{width}x{height} JPEG, {THREADS} threads per engine, {args.rounds} rounds rotated; torch {torch.__version__}")
    if skipped:
        print(f"# skipped (no package for this machine): {', '.join(skipped)}")
    reference = detections.get("torchvision")
    peer = "openvino" if "openvino" in medians else None
    # Every row names the CPU kind, so rows of different machines can share a table.
    print("| CPU | engine | precision | median lone request (ms) | min (ms) |" +
          (f" {peer} default / engine |" if peer else "") + " detections | matched torchvision's |")
    print("|---|---|---|---|---|" + ("---|" if peer else "") + "---|---|")
    for engine in engines:
        name = engine.name
        found = detections[name]
        match = ""
        if reference is not None:
            matched, counted = agreement(reference, found, 0.05, args.margin)
            match = f"{matched}/{counted}"
        ratio = f" {medians[peer] / medians[name]:.2f}x |" if peer else ""
        print(f"| {cpu} | {name} | {engine.precision} | {medians[name]:.0f} | {min(times[name]) * 1000:.0f} |{ratio} "
              f"{len(found['scores'])} | {match} |")
    if peer and "ours" in medians:
        print(f"\nours / {peer} default: {medians[peer] / medians['ours']:.2f}x faster (goal >= 2.0x, issue 54)")


if __name__ == "__main__":
    main()
