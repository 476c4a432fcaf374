"""The trainer's MLflow tracking (issue 41) against a real MLflow tracking server (`mlflow server`,
SQLite backend, local artifact root, on 127.0.0.1), read back with MLflow's own Python client:
the parameters (the resolved config), every metric's history equal to metrics.jsonl (same steps,
same values), the artifacts, status FINISHED; a job stopped by SIGTERM shows KILLED; a job whose
server comes up only while it trains exits 0 and the run holds every metric; a job whose server
never answers exits 0 and keeps every metric in output/data/mlflow_unsent.jsonl."""
import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from engine_test_job import TINY_MODEL_OPTS, TRAINER, finish, make_shapes

from mlflow.tracking import MlflowClient

MAX_ITER = 6
OPTS = " ".join(TINY_MODEL_OPTS + [
    "SOLVER.IMS_PER_BATCH 2", f"SOLVER.MAX_ITER {MAX_ITER}", "SOLVER.WARMUP_ITERS 2",
    "SOLVER.CHECKPOINT_PERIOD 100", "SOLVER.LOG_PERIOD 2", "TEST.EVAL_PERIOD 0", "SEED 5",
])
MLFLOW = pathlib.Path(sys.executable).parent / "mlflow"


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class TrackingServer:
    def __init__(self, root: pathlib.Path, port=None):
        root.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.uri = f"http://127.0.0.1:{self.port}"
        self.log = open(root / "mlflow-server.log", "wb")
        self.proc = subprocess.Popen(
            [str(MLFLOW), "server", "--host", "127.0.0.1", "--port", str(self.port), "--workers", "1",
             "--backend-store-uri", f"sqlite:///{root / 'mlflow.db'}",
             "--artifacts-destination", str(root / "artifacts")],
            stdout=self.log, stderr=subprocess.STDOUT, cwd=root, start_new_session=True)
        deadline = time.time() + 180
        while True:
            assert self.proc.poll() is None, (root / "mlflow-server.log").read_text()[-3000:]
            try:
                with urllib.request.urlopen(self.uri + "/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            assert time.time() < deadline, "mlflow server did not start"
            time.sleep(0.3)

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    return make_shapes(tmp_path_factory.mktemp("shapes"), train=8, val=2, seed=3)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tracking = TrackingServer(tmp_path_factory.mktemp("mlflow"))
    yield tracking
    tracking.stop()


def make_job(root, shapes):
    (root / "input" / "data").mkdir(parents=True)
    for channel in ("train", "val"):
        (root / "input" / "data" / channel).symlink_to(shapes)
    return root


def start(root, uri, experiment, opts=OPTS, **env_extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SM_", "RANK", "WORLD_", "MASTER_", "MLFLOW_", "AWS_"))}
    env["MRCNN_CONFIG_DIR"] = str(pathlib.Path(__file__).resolve().parents[3] / "configs")
    env.update({"MLFLOW_TRACKING_URI": uri, "MLFLOW_EXPERIMENT_NAME": experiment,
                "TRAINING_JOB_NAME": experiment + "-job"}, **env_extra)
    return subprocess.Popen([str(TRAINER), "train", "--base-dir", str(root), "--config-file",
                             "mask_rcnn_R_50_FPN_shapes_cpu.yaml", "--opts", opts],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)


def records(root):
    return [json.loads(line) for line in (root / "output" / "data" / "metrics.jsonl").read_text().splitlines()]


def jsonl_histories(root):
    """metric key -> [(step, value)] from metrics.jsonl, as the trainer sends them."""
    out = {}
    for record in records(root):
        for key, value in record.items():
            if key in ("iteration", "max_iter") or not isinstance(value, (int, float)):
                continue
            out.setdefault(key, []).append((record["iteration"], float(value)))
    return out


def only_run(uri, experiment):
    client = MlflowClient(tracking_uri=uri)
    found = client.get_experiment_by_name(experiment)
    assert found is not None, f"no experiment {experiment}"
    runs = client.search_runs([found.experiment_id])
    assert len(runs) == 1, [r.info.run_id for r in runs]
    return client, runs[0]


def assert_histories_equal(client, run, root):
    expected = jsonl_histories(root)
    assert "total_loss" in expected and "lr" in expected
    assert set(run.data.metrics) == set(expected)
    for key, history in expected.items():
        got = sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, key))
        assert got == sorted(history), key


def test_the_run_holds_the_config_every_metric_and_the_artifacts(server, shapes, tmp_path):
    root = make_job(tmp_path / "job", shapes)
    code, out = finish(start(root, server.uri, "finished"))
    assert code == 0, out[-3000:]
    assert "[mlflow] run " in out and "ended: FINISHED" in out, out[-3000:]
    client, run = only_run(server.uri, "finished")
    assert run.info.status == "FINISHED"
    assert run.info.run_name == "finished-job"
    params = run.data.params
    assert params["SOLVER.MAX_ITER"] == str(MAX_ITER)
    assert params["SOLVER.IMS_PER_BATCH"] == "2"
    assert params["MODEL.FPN.OUT_CHANNELS"] == "32"
    assert params["config_sources"].startswith("defaults")
    tags = run.data.tags
    assert tags["device"] == "cpu" and tags["processes"] == "1" and tags["precision"] == "fp32"
    assert tags["job_name"] == "finished-job"
    assert_histories_equal(client, run, root)
    names = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"config.yaml", "metrics.jsonl", "report.html"} <= names, (names, out[-3000:])
    local = client.download_artifacts(run.info.run_id, "metrics.jsonl", str(tmp_path))
    assert pathlib.Path(local).read_bytes() == (root / "output" / "data" / "metrics.jsonl").read_bytes()
    saved = json.loads((root / "checkpoints" / "mlflow_run.json").read_text())
    assert saved["run_id"] == run.info.run_id
    assert not (root / "output" / "data" / "mlflow_unsent.jsonl").exists()


def test_sigterm_marks_the_run_killed(server, shapes, tmp_path):
    root = make_job(tmp_path / "job", shapes)
    opts = OPTS.replace(f"SOLVER.MAX_ITER {MAX_ITER}", "SOLVER.MAX_ITER 400")
    proc = start(root, server.uri, "killed", opts=opts)
    metrics = root / "output" / "data" / "metrics.jsonl"
    deadline = time.time() + 240
    while not (metrics.exists() and metrics.read_text().count("\n") >= 2):
        assert proc.poll() is None and time.time() < deadline, "no training progress"
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    code, out = finish(proc)
    assert code == 0, out[-3000:]
    client, run = only_run(server.uri, "killed")
    assert run.info.status == "KILLED", out[-2000:]
    assert_histories_equal(client, run, root)


def test_a_server_that_comes_up_late_gets_every_metric(shapes, tmp_path):
    root = make_job(tmp_path / "job", shapes)
    port = free_port()
    uri = f"http://127.0.0.1:{port}"
    proc = start(root, uri, "late", MRCNN_MLFLOW_FINISH_TIMEOUT_S="120")
    metrics = root / "output" / "data" / "metrics.jsonl"
    deadline = time.time() + 240
    while not metrics.exists():
        assert proc.poll() is None and time.time() < deadline, "no training progress"
        time.sleep(0.05)
    late = TrackingServer(tmp_path / "server", port=port)
    try:
        code, out = finish(proc)
        assert code == 0, out[-3000:]
        assert "retrying with backoff" in out, out[-3000:]
        client, run = only_run(uri, "late")
        assert run.info.status == "FINISHED"
        assert_histories_equal(client, run, root)
        assert not (root / "output" / "data" / "mlflow_unsent.jsonl").exists()
    finally:
        late.stop()


def test_a_server_that_never_answers_leaves_every_metric_in_the_unsent_file(shapes, tmp_path):
    root = make_job(tmp_path / "job", shapes)
    proc = start(root, f"http://127.0.0.1:{free_port()}", "never", MRCNN_MLFLOW_FINISH_TIMEOUT_S="3")
    code, out = finish(proc)
    assert code == 0, out[-3000:]
    unsent = [json.loads(line) for line in
              (root / "output" / "data" / "mlflow_unsent.jsonl").read_text().splitlines()]
    got = {}
    for body in unsent:
        for metric in body["metrics"]:
            got.setdefault(metric["key"], []).append((metric["step"], metric["value"]))
    assert {k: sorted(v) for k, v in got.items()} == {k: sorted(v) for k, v in jsonl_histories(root).items()}
    params = {p["key"]: p["value"] for body in unsent for p in body["params"]}
    assert params["SOLVER.MAX_ITER"] == str(MAX_ITER)


def test_a_tracking_uri_we_cannot_use_fails_the_job_at_once(shapes, tmp_path):
    root = make_job(tmp_path / "job", shapes)
    code, out = finish(start(root, "file:///tmp/mlruns", "bad"))
    assert code != 0
    assert "MLFLOW_TRACKING_URI" in out and "Python-only" in out, out[-2000:]
