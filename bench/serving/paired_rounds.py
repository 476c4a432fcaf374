"""Paired rounds for a machine whose load swings (bench_serving.py runs one server after the
other, minutes apart): all servers stay up (idle ones use no CPU) and each round runs the same
load on each in turn, order reversed every round.

  .venv/bin/python bench/serving/paired_rounds.py ROUNDS CLIENTS REQUESTS [ours,ours-1worker-2threads,reference] MODEL_DIR
MODEL_DIR: e.g. from scripts/convert_weights.py --random-seed 0 --num-classes 3 --set INPUT.MIN_SIZE_TEST=480
"""
import sys
import pathlib, tempfile, json, os, time, statistics
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import bench_serving as b
import numpy as np
ROOT = pathlib.Path(__file__).resolve().parents[2]
rounds = int(sys.argv[1]); conc = int(sys.argv[2]); reqs = int(sys.argv[3])
model_dir = sys.argv[5] if len(sys.argv) > 5 else "model"
images = b.make_images(8, 640, 480)
attrs = "score_threshold=0.05,max_detections=100,masks=rle"
tmp = pathlib.Path(tempfile.mkdtemp())
server = str(ROOT / "build/bin/server")
common = ["--host", "127.0.0.1", "--port", "0", "--model-dir", model_dir, "--predictor", "model",
          "--device", "cpu", "--request-deadline-s", "3600"]
peers = {
    "ours": [server, *common, "--port-file", str(tmp / "ours.port")],
    "ours-1worker-2threads": [server, *common, "--workers", "1", "--num-threads", "2", "--port-file", str(tmp / "old.port")],
    "reference": [sys.executable, str(ROOT / "bench/serving/reference_server.py"), "--model-dir", model_dir,
                  "--port-file", str(tmp / "ref.port")],
}
want = sys.argv[4].split(",") if len(sys.argv) > 4 else list(peers)
procs, ports = {}, {}
for name in want:
    cmd = peers[name]
    pf = pathlib.Path(cmd[cmd.index("--port-file") + 1])
    procs[name], ports[name] = b.start(cmd, pf, tmp / (name + ".log"))
    b.load(ports[name], images, conc, 2, attrs)
res = {n: [] for n in want}
try:
    for r in range(rounds):
        order = want if r % 2 == 0 else want[::-1]
        for name in order:
            l0 = os.getloadavg()[0]
            wall, lat = b.load(ports[name], images, conc, reqs, attrs)
            res[name].append((len(lat) / wall, lat))
            print(f"round {r} {name:24s} {len(lat)/wall:.3f} img/s p50 {np.percentile(lat,50):.1f} s p99 {np.percentile(lat,99):.1f} s load {l0:.1f}->{os.getloadavg()[0]:.1f}", flush=True)
finally:
    for p in procs.values():
        p.terminate(); p.wait(60)
for name in want:
    lat = [x for _, l in res[name] for x in l]
    tp = statistics.mean(t for t, _ in res[name])
    print(f"TOTAL {name:24s} mean {tp:.3f} img/s p50 {np.percentile(lat,50):.1f} s p99 {np.percentile(lat,99):.1f} s")
