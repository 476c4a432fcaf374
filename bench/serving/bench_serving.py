#!/usr/bin/env python3
"""Serving benchmark: build/bin/server against a Python reference server (torchvision's
maskrcnn_resnet50_fpn with the same weights behind http.server, reference_server.py), measured
in the same run with the same images, client and concurrency.

Prints throughput (images/s) and p50/p99 latency for both, the ratios ours/theirs, and the
machine, and on a GPU the GPU's busy share while each peer is under load (nvidia-smi).
Goals: on a CPU >= 2x throughput at equal or better p99; on a GPU >= 120 img/s at p99 <= 150 ms
and >= 15x the reference (640x480 JPEG, concurrency 8, masks=rle).

  .venv/bin/python bench/serving/bench_serving.py [--concurrency 8] [--requests 48]
      [--model-dir DIR]  (default: a random-weight model made by scripts/convert_weights.py)
      [--device cpu|cuda] [--max-batch B] [--batch-wait-ms T]  (default: the server's own,
      batches of 1 on a CPU and of up to 4 within 5 ms on a GPU)
"""
import argparse
import http.client
import io
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
from PIL import Image

ROOT = pathlib.Path(__file__).resolve().parents[2]


def make_images(count, width, height, seed=0):
    """JPEGs with a few coloured shapes on a noisy background."""
    rng = np.random.default_rng(seed)
    images = []
    for _ in range(count):
        rgb = rng.integers(0, 60, size=(height, width, 3), dtype=np.uint8)
        for _ in range(rng.integers(3, 8)):
            x0, y0 = rng.integers(0, width - 40), rng.integers(0, height - 40)
            w, h = rng.integers(30, width // 3), rng.integers(30, height // 3)
            rgb[y0:y0 + h, x0:x0 + w] = rng.integers(80, 256, size=3)
        buffer = io.BytesIO()
        Image.fromarray(rgb).save(buffer, "JPEG", quality=90)
        images.append(buffer.getvalue())
    return images


def start(command, port_file, log_path, timeout=600, env=None):
    """Starts `command` (environment `env`, else ours), waits for its port file and /ping 200."""
    log = open(log_path, "wb")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    deadline = time.time() + timeout
    while not port_file.exists():
        if process.poll() is not None:
            raise SystemExit(f"{command[0]} exited: {pathlib.Path(log_path).read_text()[-2000:]}")
        if time.time() > deadline:
            process.kill()
            raise SystemExit(f"{command[0]} did not start")
        time.sleep(0.05)
    port = int(port_file.read_text())
    while True:  # /ping turns 200 after load + warm-up
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            connection.request("GET", "/ping")
            if connection.getresponse().status == 200:
                break
        except OSError:
            pass
        if process.poll() is not None or time.time() > deadline:
            process.kill()
            raise SystemExit(f"{command[0]} never became ready: {pathlib.Path(log_path).read_text()[-2000:]}")
        time.sleep(0.1)
    return process, port


def load(port, images, concurrency, requests, attributes):
    """`requests` POSTs from `concurrency` keep-alive clients; returns (wall s, latencies s)."""
    latencies = []
    failures = []
    next_index = [0]
    lock = threading.Lock()

    def client():
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        while True:
            with lock:
                index = next_index[0]
                next_index[0] += 1
            if index >= requests:
                return
            body = images[index % len(images)]
            start_time = time.perf_counter()
            connection.request("POST", "/invocations", body=body, headers={
                "Content-Type": "image/jpeg", "X-Amzn-SageMaker-Custom-Attributes": attributes})
            response = connection.getresponse()
            payload = response.read()
            elapsed = time.perf_counter() - start_time
            with lock:
                if response.status == 200 and "detections" in json.loads(payload):
                    latencies.append(elapsed)
                else:
                    failures.append((response.status, payload[:200]))

    threads = [threading.Thread(target=client) for _ in range(concurrency)]
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - began
    if failures:
        raise SystemExit(f"{len(failures)} requests failed, e.g. {failures[0]}")
    return wall, latencies


def percentile(values, q):
    return float(np.percentile(np.asarray(values), q))


def machine(device):
    cpu = "unknown CPU"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    text = f"{cpu}, {os.cpu_count()} logical CPUs, {platform.system()} {platform.release()}, device {device}"
    if device.startswith("cuda"):
        try:
            gpu = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                                 capture_output=True, text=True).stdout.strip()
            text += f" ({gpu})"
        except OSError:
            pass
    return text


class GpuBusySampler:
    """The GPU's busy share while a peer is under load: nvidia-smi's utilization.gpu (the share
    of each sample period in which a kernel ran), sampled every 100 ms by one nvidia-smi process
    for the device's index."""

    def __init__(self, device):
        self.samples = []
        self.error = None
        self.process = None
        index = device.split(":")[1] if ":" in device else "0"
        try:
            self.process = subprocess.Popen(
                ["nvidia-smi", "-i", index, "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits",
                 "-lms", "100"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        except OSError as error:
            self.error = f"nvidia-smi could not run ({error})"
            return
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.process.stdout:
            try:
                self.samples.append(float(line.strip()))
            except ValueError:
                pass

    def stop(self):
        """The mean busy percentage, or None with self.error saying why."""
        if self.process is None:
            return None
        self.process.terminate()
        self.process.wait(timeout=10)
        self.reader.join(timeout=10)
        if not self.samples:
            self.error = "nvidia-smi gave no samples"
            return None
        return statistics.mean(self.samples)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build-dir", type=pathlib.Path,
                        default=pathlib.Path(os.environ.get("MRCNN_BUILD_DIR", ROOT / "build")))
    parser.add_argument("--model-dir", type=pathlib.Path)
    parser.add_argument("--num-classes", type=int, default=3,
                        help="classes of the random-weight model (few classes: random scores pass 0.05)")
    parser.add_argument("--min-size", type=int, default=800,
                        help="INPUT.MIN_SIZE_TEST of the random-weight model (both servers resize to it)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--requests", type=int, default=48)
    parser.add_argument("--warmup-requests", type=int, default=4)
    parser.add_argument("--image-size", default="640x480")
    parser.add_argument("--max-batch", type=int, help="default: the server's own for the device")
    parser.add_argument("--batch-wait-ms", type=float, help="default: the server's own")
    parser.add_argument("--attributes", default="score_threshold=0.05,max_detections=100,masks=rle")
    parser.add_argument("--results-json", type=pathlib.Path, help="append the numbers here")
    args = parser.parse_args()

    server = args.build_dir / "bin" / "server"
    if not server.exists():
        raise SystemExit(f"{server} is missing: build mrcnn_server first")
    width, height = (int(v) for v in args.image_size.split("x"))
    images = make_images(8, width, height)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        model_dir = args.model_dir
        if model_dir is None:
            model_dir = tmp / "model"
            subprocess.run([sys.executable, str(ROOT / "scripts" / "convert_weights.py"), "--random-seed", "0",
                            "--num-classes", str(args.num_classes), "--set", f"INPUT.MIN_SIZE_TEST={args.min_size}",
                            "--output", str(model_dir)], check=True)
        peers = {
            "ours (build/bin/server)": [str(server), "--host", "127.0.0.1", "--port", "0", "--port-file",
                                        str(tmp / "ours.port"), "--model-dir", str(model_dir), "--predictor",
                                        "model", "--device", args.device,
                                        *(["--max-batch", str(args.max_batch)] if args.max_batch else []),
                                        *(["--batch-wait-ms", str(args.batch_wait_ms)]
                                          if args.batch_wait_ms is not None else []),
                                        # the reference has no deadline either; overload must
                                        # show as latency here, not as 503s
                                        "--request-deadline-s", "3600"],
            "reference (torchvision + http.server)": [sys.executable, str(ROOT / "bench" / "serving" / "reference_server.py"),
                                                      "--model-dir", str(model_dir), "--device", args.device,
                                                      "--port-file", str(tmp / "reference.port")],
        }
        results = {}
        for name, command in peers.items():
            port_file = pathlib.Path(command[command.index("--port-file") + 1])
            process, port = start(command, port_file, tmp / (port_file.stem + ".log"))
            try:
                load(port, images, args.concurrency, args.warmup_requests, args.attributes)
                sampler = GpuBusySampler(args.device) if args.device.startswith("cuda") else None
                try:
                    wall, latencies = load(port, images, args.concurrency, args.requests, args.attributes)
                finally:
                    busy = sampler.stop() if sampler else None
            finally:
                process.terminate()
                process.wait(timeout=60)
            results[name] = {
                "throughput_img_s": len(latencies) / wall,
                "p50_ms": percentile(latencies, 50) * 1000,
                "p99_ms": percentile(latencies, 99) * 1000,
                "mean_ms": statistics.mean(latencies) * 1000,
                "requests": len(latencies),
                "gpu_busy_percent": busy,
            }
            r = results[name]
            gpu = ""
            if sampler:
                gpu = f"  GPU busy {busy:5.1f} %" if busy is not None else f"  GPU busy: not measured, {sampler.error}"
            print(f"{name:40s} {r['throughput_img_s']:7.2f} img/s  p50 {r['p50_ms']:8.1f} ms  "
                  f"p99 {r['p99_ms']:8.1f} ms  ({r['requests']} requests){gpu}", flush=True)
    ours, theirs = results.values()
    ratio_throughput = ours["throughput_img_s"] / theirs["throughput_img_s"]
    ratio_p99 = ours["p99_ms"] / theirs["p99_ms"]
    goal = (">= 120 img/s at p99 <= 150 ms and >= 15x the reference" if args.device.startswith("cuda")
            else ">= 2x throughput at <= 1x p99")
    print(f"ratio ours/reference: throughput {ratio_throughput:.2f}x, p99 latency {ratio_p99:.2f}x "
          f"(goal: {goal})")
    description = machine(args.device)
    print(f"machine: {description}; {args.concurrency} concurrent keep-alive clients, {args.image_size} JPEG, "
          f"server batches {'<= ' + str(args.max_batch) if args.max_batch else 'default'}"
          f"{' / ' + str(args.batch_wait_ms) + ' ms' if args.batch_wait_ms is not None else ''}, "
          f"attributes {args.attributes}")
    if args.results_json:
        record = {"machine": description, "args": {k: str(v) for k, v in vars(args).items()},
                  "results": results, "ratio_throughput": ratio_throughput, "ratio_p99": ratio_p99}
        with open(args.results_json, "a") as out:
            out.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    main()
