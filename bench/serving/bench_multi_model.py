#!/usr/bin/env python3
"""Multi-model endpoint benchmark: what a caller of build/bin/server with
SAGEMAKER_MULTI_MODEL=true waits for when a model is loaded, and when the model it invokes
was evicted (SageMaker then loads it again, and the first request pays the load).

Peer, measured in the same run on the same model dir: the single-model server, from start
to its first /ping 200 (load plus warm-up: what a real-time endpoint's cold start costs),
and its warm /invocations latency. Prints the medians and the ratios ours/peer:
  load          POST /models until 200 (load + warm-up), vs the single-model cold start
  warm          POST /models/{name}/invoke on a loaded model, vs the peer's /invocations
  after evict   the first request to an evicted model: its POST /models plus its invoke

  .venv/bin/python bench/serving/bench_multi_model.py [--models 3] [--rounds 2]
      [--image-size 640x480] [--min-size 800]
"""
import argparse
import http.client
import json
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

from bench_serving import machine, make_images, start

ROOT = pathlib.Path(__file__).resolve().parents[2]


def request(port, method, path, body=b"", headers=None, timeout=600):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    start_time = time.perf_counter()
    connection.request(method, path, body=body, headers=headers or {})
    reply = connection.getresponse()
    data = reply.read()
    elapsed = time.perf_counter() - start_time
    connection.close()
    return reply.status, data, elapsed


def invoke(port, path, image):
    status, data, elapsed = request(port, "POST", path, image, {"Content-Type": "image/jpeg"})
    if status != 200:
        raise SystemExit(f"{path}: {status} {data[:300]!r}")
    return elapsed


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", type=int, default=3, help="models in rotation (the budget holds 2)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--image-size", default="640x480")
    parser.add_argument("--min-size", type=int, default=800)
    parser.add_argument("--build-dir", type=pathlib.Path, default=ROOT / "build")
    args = parser.parse_args()
    server = args.build_dir / "bin" / "server"
    width, height = (int(v) for v in args.image_size.split("x"))
    image = make_images(1, width, height)[0]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        dirs = []
        for i in range(args.models):
            model_dir = tmp / f"model{i}"
            subprocess.run([sys.executable, str(ROOT / "scripts" / "convert_weights.py"), "--random-seed", str(i),
                            "--num-classes", "3", "--set", f"INPUT.MIN_SIZE_TEST={args.min_size}",
                            "--output", str(model_dir)], check=True, capture_output=True)
            dirs.append(model_dir)
        weights_mb = sum(f.stat().st_size for f in dirs[0].iterdir()) / 2**20
        workspace_mb = 1024
        budget_mb = int(2.5 * (weights_mb + workspace_mb))  # two models fit, a third does not

        def peer_round():
            """The single-model server on model0: cold start to /ping 200, then warm requests."""
            port_file = tmp / "single.port"
            port_file.unlink(missing_ok=True)
            t0 = time.perf_counter()
            process, port = start([str(server), "--host", "127.0.0.1", "--port", "0", "--port-file", str(port_file),
                                   "--model-dir", str(dirs[0]), "--predictor", "model", "--workers", "1"],
                                  port_file, tmp / "single.log")
            try:
                cold_starts.append(time.perf_counter() - t0)
                peer_warm.extend(invoke(port, "/invocations", image) for _ in range(2))
            finally:
                process.terminate()
                process.wait(timeout=60)

        port_file = tmp / "mme.port"
        env_command = ["env", "SAGEMAKER_MULTI_MODEL=true", f"MRCNN_MME_MEMORY_BUDGET_MB={budget_mb}",
                       f"MRCNN_MME_WORKSPACE_MB={workspace_mb}", str(server), "--host", "127.0.0.1", "--port", "0",
                       "--port-file", str(port_file), "--predictor", "model"]
        cold_starts, peer_warm = [], []
        loads, warm, after_evict, evictions = [], [], [], 0
        # The peer's rounds alternate with ours, so a machine that gets busier or quieter
        # during the run shifts both alike.
        process, port = start(env_command, port_file, tmp / "mme.log")
        try:
            for round_index in range(args.rounds):
                for i, model_dir in enumerate(dirs):
                    peer_round()
                    name = f"model{i}"
                    path = f"/models/{name}/invoke"
                    status, _, _ = request(port, "GET", f"/models/{name}")
                    if status == 404:
                        body = json.dumps({"model_name": name, "url": str(model_dir)}).encode()
                        status, data, load_time = request(port, "POST", "/models", body,
                                                          {"Content-Type": "application/json"})
                        if status != 200:
                            raise SystemExit(f"load {name}: {status} {data[:300]!r}")
                        first = invoke(port, path, image)
                        loads.append(load_time)
                        evictions += len(json.loads(data)["evicted"])
                        if round_index > 0:  # this model was evicted since it last served
                            after_evict.append(load_time + first)
                    warm.extend(invoke(port, path, image) for _ in range(2))
        finally:
            process.terminate()
            process.wait(timeout=60)

    med = statistics.median
    print(f"machine: {machine('cpu')}")
    print(f"models: {args.models} random-weight R50-FPN ({weights_mb:.0f} MiB each), budget {budget_mb} MiB "
          f"(2 fit), {args.rounds} rounds, {evictions} evictions; image {args.image_size}, min size {args.min_size}")
    print(f"load (POST /models)          {med(loads) * 1000:8.0f} ms   single-model cold start "
          f"{med(cold_starts) * 1000:8.0f} ms   ratio {med(loads) / med(cold_starts):.2f}")
    print(f"warm invoke                  {med(warm) * 1000:8.0f} ms   single-model /invocations "
          f"{med(peer_warm) * 1000:8.0f} ms   ratio {med(warm) / med(peer_warm):.2f}")
    if after_evict:
        print(f"first request after eviction {med(after_evict) * 1000:8.0f} ms   "
              f"(load + first invoke; {med(after_evict) / med(warm):.1f}x a warm invoke)")


if __name__ == "__main__":
    main()
