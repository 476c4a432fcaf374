"""A real MLflow tracking server on loopback for scripts/test-containers.sh, and the check of the
run the training image's trainer logged there (run with the checkout's .venv, which holds mlflow).

  serve ROOT PORT_FILE             starts `mlflow server` on 127.0.0.1 (a free port, SQLite in
                                   ROOT, artifacts under ROOT), waits for /health, writes the
                                   port to PORT_FILE and stays until SIGTERM (then stops the
                                   server); exits 1 if the server does not come up in 180 s
  check-run URI EXPERIMENT METRICS_JSONL AFTER MAX_ITER
                                   the experiment holds one run, FINISHED, whose parameters
                                   include SOLVER.MAX_ITER = MAX_ITER, whose every metric's
                                   history equals the records of METRICS_JSONL after iteration
                                   AFTER (the iterations that job ran: same steps, same values),
                                   with config.yaml and metrics.jsonl among its artifacts
Each prints one line saying what held, or exits 1 naming what did not.
"""
import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time
import urllib.request


def fail(message):
    print(f"mlflow_server.py: {message}", file=sys.stderr)
    sys.exit(1)


def serve(root, port_file):
    root = pathlib.Path(root)
    root.mkdir(parents=True, exist_ok=True)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    mlflow = pathlib.Path(sys.executable).parent / "mlflow"
    if not mlflow.exists():
        fail(f"{mlflow} not found: run scripts/setup.sh (scripts/requirements.txt has mlflow)")
    log = open(root / "mlflow-server.log", "wb")
    server = subprocess.Popen(
        [str(mlflow), "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
         "--backend-store-uri", f"sqlite:///{root / 'mlflow.db'}",
         "--artifacts-destination", str(root / "artifacts")],
        stdout=log, stderr=subprocess.STDOUT, cwd=root, start_new_session=True)

    def stop(*_):
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait()
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    deadline = time.time() + 180
    while True:
        if server.poll() is not None:
            fail(f"mlflow server exited {server.returncode}: see {root / 'mlflow-server.log'}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as answer:
                if answer.status == 200:
                    break
        except OSError:
            pass
        if time.time() > deadline:
            os.killpg(server.pid, signal.SIGKILL)
            fail("mlflow server did not answer /health within 180 s")
        time.sleep(0.3)
    pathlib.Path(port_file).write_text(f"{port}\n")
    while server.poll() is None:
        time.sleep(1)
    fail(f"mlflow server exited {server.returncode} while in use")


def check_run(uri, experiment, metrics_jsonl, after, max_iter):
    from mlflow.tracking import MlflowClient

    after = int(after)
    client = MlflowClient(tracking_uri=uri)
    found = client.get_experiment_by_name(experiment)
    if found is None:
        fail(f"no experiment {experiment} on {uri}")
    runs = client.search_runs([found.experiment_id])
    if len(runs) != 1:
        fail(f"experiment {experiment} holds {len(runs)} runs, not 1")
    run = runs[0]
    if run.info.status != "FINISHED":
        fail(f"run {run.info.run_id} is {run.info.status}, not FINISHED")
    if run.data.params.get("SOLVER.MAX_ITER") != str(max_iter):
        fail(f"parameter SOLVER.MAX_ITER is {run.data.params.get('SOLVER.MAX_ITER')!r}, not {max_iter}")
    expected = {}
    for line in pathlib.Path(metrics_jsonl).read_text().splitlines():
        record = json.loads(line)
        if record.get("iteration", 0) <= after:
            continue
        for key, value in record.items():
            if key not in ("iteration", "max_iter") and isinstance(value, (int, float)):
                expected.setdefault(key, []).append((record["iteration"], float(value)))
    if "total_loss" not in expected:
        fail(f"{metrics_jsonl} has no total_loss after iteration {after}")
    if set(run.data.metrics) != set(expected):
        fail(f"run metrics {sorted(run.data.metrics)} differ from metrics.jsonl's {sorted(expected)}")
    points = 0
    for key, history in expected.items():
        got = sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, key))
        if got != sorted(history):
            fail(f"metric {key}: the run holds {got}, metrics.jsonl {sorted(history)}")
        points += len(got)
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    missing = {"config.yaml", "metrics.jsonl"} - artifacts
    if missing:
        fail(f"artifacts {sorted(missing)} missing (the run has {sorted(artifacts)})")
    print(f"MLflow run {run.info.run_id}: FINISHED, {len(run.data.params)} parameters, "
          f"{len(expected)} metrics ({points} points) equal to metrics.jsonl after iteration {after}, "
          f"artifacts {', '.join(sorted(artifacts))}")


if __name__ == "__main__":
    commands = {"serve": (serve, 2), "check-run": (check_run, 5)}
    if len(sys.argv) < 2 or sys.argv[1] not in commands or len(sys.argv) - 2 != commands[sys.argv[1]][1]:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    commands[sys.argv[1]][0](*sys.argv[2:])
