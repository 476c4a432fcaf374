#!/usr/bin/env python3
"""Serving on N cores: latency of a lone client and throughput of 4 clients, for our server
(the busy workers share the cores: a lone request uses them all), our server with each
worker's threads fixed at cores / workers (`--num-threads`, the layout before core sharing)
and the Python reference server (reference_server.py: torchvision's maskrcnn_resnet50_fpn
with the same weights), all measured in the same run.

Each core count is simulated with `taskset -c 0-(N-1)` on all three servers (the machine's
own count is the largest it can show; a bigger machine shows more). For each core count the
three servers are up at once (an idle one uses no CPU) and each round runs the same load on
each in turn, order reversed every round, so that a machine whose load swings hits all three
alike.

  .venv/bin/python bench/serving/bench_core_share.py [--cores 1,2] [--rounds 2]
      [--lone-requests 4] [--loaded-requests 16] [--model-dir DIR]
"""
import argparse
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import bench_serving as b  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
ATTRIBUTES = "score_threshold=0.05,max_detections=100,masks=rle"


def measure(port, images, clients, requests):
    wall, latencies = b.load(port, images, clients, requests, ATTRIBUTES)
    return len(latencies) / wall, latencies


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build-dir", type=pathlib.Path,
                        default=pathlib.Path(os.environ.get("MRCNN_BUILD_DIR", ROOT / "build")))
    parser.add_argument("--model-dir", type=pathlib.Path,
                        help="default: random weights, 3 classes, INPUT.MIN_SIZE_TEST 480")
    parser.add_argument("--cores", default=None, help="comma-separated core counts (default: 1 and all usable)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--lone-requests", type=int, default=4, help="per server per round, 1 client")
    parser.add_argument("--loaded-requests", type=int, default=16, help="per server per round, 4 clients")
    parser.add_argument("--loaded-clients", type=int, default=4)
    args = parser.parse_args()

    usable = len(os.sched_getaffinity(0))
    cpus = sorted(os.sched_getaffinity(0))
    core_counts = [int(c) for c in args.cores.split(",")] if args.cores else sorted({1, usable})
    if max(core_counts) > usable:
        raise SystemExit(f"--cores {args.cores}: only {usable} usable cores here")
    server = args.build_dir / "bin" / "server"
    if not server.exists():
        raise SystemExit(f"{server} is missing: build mrcnn_server first")
    images = b.make_images(8, 640, 480)
    summary = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        model_dir = args.model_dir
        if model_dir is None:
            model_dir = tmp / "model"
            subprocess.run([sys.executable, str(ROOT / "scripts" / "convert_weights.py"), "--random-seed", "0",
                            "--num-classes", "3", "--set", "INPUT.MIN_SIZE_TEST=480", "--output", str(model_dir)],
                           check=True, stdout=subprocess.DEVNULL)
        for cores in core_counts:
            pin = ["taskset", "-c", ",".join(str(c) for c in cpus[:cores])]
            ours = [str(server), "--host", "127.0.0.1", "--port", "0", "--model-dir", str(model_dir),
                    "--predictor", "model", "--request-deadline-s", "3600"]
            workers = min(cores, 4)
            peers = {
                "ours (shared cores)": [*pin, *ours, "--port-file", str(tmp / f"shared{cores}.port")],
                f"ours ({workers} x {cores // workers} fixed)": [
                    *pin, *ours, "--num-threads", str(max(1, cores // workers)),
                    "--port-file", str(tmp / f"fixed{cores}.port")],
                "reference": [*pin, sys.executable, str(ROOT / "bench" / "serving" / "reference_server.py"),
                              "--model-dir", str(model_dir), "--port-file", str(tmp / f"reference{cores}.port")],
            }
            processes, ports = {}, {}
            try:
                for name, command in peers.items():
                    port_file = pathlib.Path(command[command.index("--port-file") + 1])
                    processes[name], ports[name] = b.start(command, port_file, tmp / (port_file.stem + ".log"))
                    measure(ports[name], images, 1, 2)  # first requests pay for lazy set-up
                lone = {name: [] for name in peers}
                loaded = {name: [] for name in peers}
                for round_index in range(args.rounds):
                    order = list(peers) if round_index % 2 == 0 else list(peers)[::-1]
                    for name in order:
                        load_before = os.getloadavg()[0]
                        _, latencies = measure(ports[name], images, 1, args.lone_requests)
                        lone[name] += latencies
                        throughput, _ = measure(ports[name], images, args.loaded_clients, args.loaded_requests)
                        loaded[name].append(throughput)
                        print(f"{cores} core(s) round {round_index} {name:26s} lone p50 "
                              f"{np.percentile(latencies, 50):5.2f} s  {args.loaded_clients} clients "
                              f"{throughput:5.3f} img/s  (load average {load_before:.1f} -> "
                              f"{os.getloadavg()[0]:.1f})", flush=True)
            finally:
                for process in processes.values():
                    process.terminate()
                for process in processes.values():
                    process.wait(timeout=60)
            for name in peers:
                summary.append((cores, name, float(np.percentile(lone[name], 50)), statistics.mean(lone[name]),
                                statistics.mean(loaded[name])))
    print(f"\nmachine: {b.machine('cpu')}; 640x480 JPEG, {ATTRIBUTES}; {args.rounds} rounds of "
          f"{args.lone_requests} lone requests and {args.loaded_requests} requests from {args.loaded_clients} "
          f"clients per server")
    print(f"{'cores':>5} {'server':26s} {'lone p50':>9} {'lone mean':>10} {'img/s':>7}  "
          f"{'lone vs ref':>11} {'img/s vs ref':>12}")
    for cores, name, p50, mean, throughput in summary:
        reference = next(s for s in summary if s[0] == cores and s[1] == "reference")
        print(f"{cores:5d} {name:26s} {p50:8.2f}s {mean:9.2f}s {throughput:7.3f}  "
              f"{p50 / reference[2]:10.2f}x {throughput / reference[4]:11.2f}x")


if __name__ == "__main__":
    main()
