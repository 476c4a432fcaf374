#!/usr/bin/env python3
"""Launch overhead, line-forwarding throughput and peak RSS of `entrypoint train`
against the public SageMaker training toolkit (PyPI sagemaker-training, its
`train` console script) launching the same child on the same kind of /opt/ml tree
in the same run.

The child is build/tests/test_child_process, copied into each tree's code/ dir
and named by the sagemaker_program hyperparameter, so both supervisors take the
"user program" path:
  --mode stamp   writes CLOCK_REALTIME (ns) to a file and exits:
                 launch overhead = stamp - time just before the supervisor is spawned
  --mode flood   writes N MB of 100-byte lines to stdout as fast as it can:
                 throughput = N MB / wall time of the whole run, supervisor stdout -> /dev/null
Peak RSS = VmHWM of the supervisor process itself (the toolkit's Python process),
polled from /proc while it runs.

Run: .venv/bin/python bench/entrypoint/bench_entrypoint.py [--build-dir build]
"""
import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def clean_env(base_dir):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SM_", "PET_", "SLURM_", "OMPI_", "MRCNN_", "SAGEMAKER_"))
           and k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    env["SAGEMAKER_BASE_DIR"] = str(base_dir)  # the toolkit reads this; we do too
    return env


def make_tree(root, child, hyperparameters):
    base = root / "ml"
    for sub in ("input/config", "input/data/train", "code", "output", "model"):
        (base / sub).mkdir(parents=True, exist_ok=True)
    # A copy, not a symlink: the toolkit chmods the entry point it runs.
    shutil.copy2(child, base / "code" / "child")
    hps = {"sagemaker_program": "child", "sagemaker_submit_directory": str(base / "code")}
    hps.update(hyperparameters)
    (base / "input/config/hyperparameters.json").write_text(
        json.dumps({k: json.dumps(v) for k, v in hps.items()}))
    # The toolkit needs resourceconfig.json and waits until every host resolves:
    # name one that does.
    (base / "input/config/resourceconfig.json").write_text(json.dumps(
        {"current_host": "localhost", "hosts": ["localhost"], "current_instance_type": "local",
         "current_group_name": "homogeneousCluster", "network_interface_name": "lo"}))
    (base / "input/config/inputdataconfig.json").write_text(json.dumps(
        {"train": {"ContentType": "application/json", "TrainingInputMode": "File",
                   "S3DistributionType": "FullyReplicated", "RecordWrapperType": "None"}}))
    return base


class PeakRss:
    """Polls VmHWM (peak resident set) of one pid until it exits."""

    def __init__(self, pid):
        self.pid = pid
        self.kib = 0
        self._stop = False
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        path = f"/proc/{self.pid}/status"
        while not self._stop:
            try:
                with open(path) as f:
                    for line in f:
                        if line.startswith("VmHWM:"):
                            self.kib = max(self.kib, int(line.split()[1]))
            except OSError:
                return
            time.sleep(0.002)

    def stop(self):
        self._stop = True
        self._thread.join()
        return self.kib / 1024.0


def run_supervisor(cmd, env, stdout=subprocess.DEVNULL):
    start_ns = time.time_ns()
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=stdout, stderr=subprocess.DEVNULL)
    rss = PeakRss(proc.pid)
    rc = proc.wait()
    wall = time.perf_counter() - start
    peak = rss.stop()
    if rc != 0:
        raise SystemExit(f"{cmd[0]} exited with {rc}")
    return start_ns, wall, peak


def ours_cmd(entrypoint, base, extra=()):
    return [str(entrypoint), "train", "--base-dir", str(base), *extra]


def launch_overhead(cmd_for, child, runs, tmp, label):
    samples, walls, peaks = [], [], []
    for i in range(runs):
        root = Path(tmp) / f"{label}-launch-{i}"
        stamp = root / "stamp"
        base = make_tree(root, child, {"mode": "stamp", "stamp-file": str(stamp)})
        start_ns, wall, peak = run_supervisor(cmd_for(base), clean_env(base))
        samples.append((int(stamp.read_text()) - start_ns) / 1e6)
        walls.append(wall * 1e3)
        peaks.append(peak)
    return statistics.median(samples), statistics.median(walls), max(peaks)


def flood(cmd_for, child, megabytes, tmp, label, stdout=subprocess.DEVNULL, processes=1):
    """megabytes in all, split evenly over `processes` children."""
    root = Path(tmp) / f"{label}-flood"
    base = make_tree(root, child, {"mode": "flood", "megabytes": megabytes // processes, "line-bytes": 100})
    _, wall, peak = run_supervisor(cmd_for(base), clean_env(base), stdout)
    return megabytes / wall, peak


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build-dir", default=os.environ.get("MRCNN_BUILD_DIR", str(REPO / "build")))
    parser.add_argument("--launch-runs", type=int, default=20)
    parser.add_argument("--toolkit-launch-runs", type=int, default=5)
    parser.add_argument("--flood-mb", type=int, default=2000)
    parser.add_argument("--toolkit-flood-mb", type=int, default=200)
    args = parser.parse_args()

    build = Path(args.build_dir)
    entrypoint = build / "bin" / "entrypoint"
    child = build / "tests" / "test_child_process"
    toolkit = Path(sys.executable).parent / "train"
    for path, hint in ((entrypoint, "build the entrypoint target"), (child, "build test_child_process"),
                       (toolkit, "pip install sagemaker-training into this venv")):
        if not path.exists():
            raise SystemExit(f"{path} is missing: {hint}")

    def theirs(base):
        return [str(toolkit)]

    print(f"machine: {platform.node()}, {os.cpu_count()} CPUs, {platform.platform()}, no GPU used")
    with tempfile.TemporaryDirectory(prefix="mrcnn-bench-entrypoint-") as tmp:
        # Warm the page cache for both before timing anything.
        launch_overhead(lambda b: ours_cmd(entrypoint, b), child, 2, tmp, "warm-ours")
        launch_overhead(theirs, child, 1, tmp, "warm-theirs")

        ours_launch, ours_wall, ours_rss_launch = launch_overhead(
            lambda b: ours_cmd(entrypoint, b), child, args.launch_runs, tmp, "ours")
        their_launch, their_wall, their_rss_launch = launch_overhead(
            theirs, child, args.toolkit_launch_runs, tmp, "theirs")
        # The floor: this script starting the child itself, no supervisor.
        direct_launch, _, _ = launch_overhead(
            lambda b: [str(b / "code" / "child"), "--mode", "stamp", "--stamp-file", str(b.parent / "stamp")],
            child, args.launch_runs, tmp, "direct")
        print("\nlaunch overhead (supervisor spawned -> child running), median")
        print(f"  entrypoint          {ours_launch:9.2f} ms   (whole run {ours_wall:.1f} ms, {args.launch_runs} runs)")
        print(f"  sagemaker-training  {their_launch:9.2f} ms   (whole run {their_wall:.1f} ms, {args.toolkit_launch_runs} runs)")
        print(f"  child started directly {direct_launch:6.2f} ms   (no supervisor: process start floor)")
        print(f"  ratio theirs/ours   {their_launch / ours_launch:9.1f} x   (goal >= 20 x)")

        ours_mbs, ours_rss = flood(lambda b: ours_cmd(entrypoint, b), child, args.flood_mb, tmp, "ours")
        ours8_mbs, ours8_rss = flood(lambda b: ours_cmd(entrypoint, b, ["--nproc-per-node", "8"]), child,
                                     args.flood_mb, tmp, "ours8", processes=8)
        pipe_reader = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
        ours_pipe_mbs, _ = flood(lambda b: ours_cmd(entrypoint, b), child, args.flood_mb, tmp, "ourspipe",
                                 stdout=pipe_reader.stdin)
        pipe_reader.stdin.close()
        pipe_reader.wait()
        their_mbs, their_rss = flood(theirs, child, args.toolkit_flood_mb, tmp, "theirs")
        print("\nforwarding throughput, 100-byte lines, MB/s (1 MB = 1e6 bytes)")
        print(f"  entrypoint, 1 process  -> /dev/null   {ours_mbs:9.1f}   ({args.flood_mb} MB)")
        print(f"  entrypoint, 8 processes -> /dev/null  {ours8_mbs:9.1f}   ({args.flood_mb} MB in all)")
        print(f"  entrypoint, 1 process  -> pipe (cat)  {ours_pipe_mbs:9.1f}")
        print(f"  sagemaker-training, 1 process         {their_mbs:9.1f}   ({args.toolkit_flood_mb} MB)")
        print(f"  ratio ours/theirs                     {ours_mbs / their_mbs:9.1f} x   (goal >= 200 MB/s)")

        print("\nsupervisor peak RSS (VmHWM), MiB")
        print(f"  entrypoint          launch {ours_rss_launch:6.1f}   flood {max(ours_rss, ours8_rss):6.1f}   (goal <= 10)")
        print(f"  sagemaker-training  launch {their_rss_launch:6.1f}   flood {their_rss:6.1f}")
        print(f"  ratio theirs/ours   {their_rss / max(ours_rss, ours8_rss):6.1f} x")


if __name__ == "__main__":
    main()
