"""A real Prometheus scrapes the server's GET /metrics every second while concurrent clients load
it (issue 41). Prometheus is Debian's package, unpacked by scripts/setup.sh into
.deb/prometheus (not installed: its service would listen on every interface). Everything binds
to 127.0.0.1. The series read back through Prometheus's HTTP API must count exactly the requests
sent, by route and status code, and the batches' images; the target must be up (Prometheus
parsed every line of our exposition)."""
import concurrent.futures
import http.client
import io
import json
import os
import pathlib
import socket
import subprocess
import time
import urllib.parse
import urllib.request

import numpy as np
from PIL import Image

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("MRCNN_BUILD_DIR", str(ROOT / "build")))
PROMETHEUS = ROOT / ".deb" / "prometheus" / "usr" / "bin" / "prometheus"

CLIENTS = 8
REQUESTS_PER_CLIENT = 15
NOT_FOUND = 10


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(what, check, timeout, processes):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        for name, process, log in processes:
            if process.poll() is not None:
                raise AssertionError(f"{name} exited ({process.returncode}) while waiting for {what}:\n"
                                     f"{log.read_text()[-3000:]}")
        try:
            last = check()
            if last:
                return last
        except OSError as error:
            last = error
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}; last: {last}")


def request(port, method, path, body=None, headers=None, timeout=30):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def query(prometheus_port, promql):
    url = f"http://127.0.0.1:{prometheus_port}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(url, timeout=10) as response:
        answer = json.load(response)
    assert answer["status"] == "success", answer
    return answer["data"]["result"]


def scalar(prometheus_port, promql):
    result = query(prometheus_port, promql)
    return float(result[0]["value"][1]) if result else None


def png_image(seed):
    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 255, size=(48, 64, 3), dtype=np.uint8)
    pixels[5:20, 10:30] = (0, 255, 0)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="PNG")
    return out.getvalue()


def test_prometheus_scrapes_what_the_server_answered(tmp_path):
    assert PROMETHEUS.is_file(), f"{PROMETHEUS} is missing: scripts/setup.sh unpacks Debian's prometheus there"
    server_binary = BUILD / "bin" / "server"
    assert server_binary.is_file(), f"{server_binary} is missing: build mrcnn_server first"

    model = tmp_path / "model"
    model.mkdir()
    (model / "statistics_predictor.json").write_text(json.dumps({"image_delay_ms": 5}))
    server_log = tmp_path / "server.log"
    port_file = tmp_path / "port"
    processes = []
    with open(server_log, "wb") as log:
        server = subprocess.Popen([str(server_binary), "--host", "127.0.0.1", "--port", "0", "--port-file",
                                   str(port_file), "--model-dir", str(model), "--max-batch", "4"],
                                  stdout=subprocess.DEVNULL, stderr=log)
    processes.append(("the server", server, server_log))
    try:
        port = wait_for("the server's port", lambda: port_file.exists() and int(port_file.read_text()), 120,
                        processes)
        wait_for("the server's /ping", lambda: request(port, "GET", "/ping")[0] == 200, 120, processes)

        prometheus_port = free_port()
        config = tmp_path / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
            "scrape_configs:\n  - job_name: mrcnn-serving\n"
            f"    static_configs:\n      - targets: ['127.0.0.1:{port}']\n")
        prometheus_log = tmp_path / "prometheus.log"
        with open(prometheus_log, "wb") as log:
            prometheus = subprocess.Popen(
                [str(PROMETHEUS), f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                 f"--web.listen-address=127.0.0.1:{prometheus_port}", "--log.level=warn"],
                stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path)
        processes.append(("prometheus", prometheus, prometheus_log))

        wait_for("Prometheus to be ready",
                 lambda: request(prometheus_port, "GET", "/-/ready", timeout=2)[0] == 200, 60, processes)

        def target_up():
            with urllib.request.urlopen(f"http://127.0.0.1:{prometheus_port}/api/v1/targets", timeout=5) as r:
                targets = json.load(r)["data"]["activeTargets"]
            if not targets:
                return False  # discovery has not run yet
            assert len(targets) == 1, targets
            assert targets[0]["health"] != "down", f"Prometheus could not scrape us: {targets[0]['lastError']}"
            return targets[0]["health"] == "up"

        wait_for("Prometheus's first scrape of the server", target_up, 30, processes)

        bodies = [png_image(seed) for seed in range(4)]

        def client(index):
            statuses = []
            for i in range(REQUESTS_PER_CLIENT):
                statuses.append(request(port, "POST", "/invocations", body=bodies[(index + i) % len(bodies)],
                                        headers={"Content-Type": "image/png"})[0])
            return statuses

        with concurrent.futures.ThreadPoolExecutor(CLIENTS) as pool:
            statuses = [s for part in pool.map(client, range(CLIENTS)) for s in part]
        assert statuses == [200] * CLIENTS * REQUESTS_PER_CLIENT
        for _ in range(NOT_FOUND):
            assert request(port, "GET", "/no-such-route")[0] == 404
        sent = CLIENTS * REQUESTS_PER_CLIENT

        invocations = 'mrcnn_http_requests_total{job="mrcnn-serving",route="/invocations",code="200",method="POST"}'
        # Scrapes every second: the one after the load sees the final counts.
        wait_for("a scrape after the load",
                 lambda: scalar(prometheus_port, invocations) == sent
                 and scalar(prometheus_port, 'mrcnn_http_requests_total{route="unmatched",code="404"}') == NOT_FOUND,
                 30, processes)
        assert scalar(prometheus_port, invocations) == sent
        assert scalar(prometheus_port, 'sum(mrcnn_http_requests_total{route="/invocations"})') == sent
        assert scalar(prometheus_port, 'mrcnn_http_request_duration_seconds_count{route="/invocations"}') == sent
        assert scalar(prometheus_port, "mrcnn_inference_batch_images_sum") == sent
        assert scalar(prometheus_port, "mrcnn_inference_queue_wait_seconds_count") == sent
        batches = scalar(prometheus_port, "mrcnn_inference_batch_images_count")
        assert 0 < batches <= sent
        p99 = scalar(prometheus_port,
                     'histogram_quantile(0.99, mrcnn_http_request_duration_seconds_bucket{route="/invocations"})')
        assert p99 is not None and 0 < p99 < 60
        assert scalar(prometheus_port, 'mrcnn_model_state{state="ready"}') == 1
        assert scalar(prometheus_port, "mrcnn_inference_queue_depth") == 0
        assert scalar(prometheus_port, "process_resident_memory_bytes") > 1e6
        # Every scrape of the run succeeded: `up` never 0 in the series Prometheus kept.
        assert scalar(prometheus_port, 'min_over_time(up{job="mrcnn-serving"}[5m])') == 1
        print(f"{sent} requests in {batches:.0f} batches; p99 {p99 * 1000:.1f} ms; scrape took "
              f"{scalar(prometheus_port, 'max_over_time(scrape_duration_seconds[5m])') * 1000:.2f} ms at most")
    finally:
        for _, process, _ in reversed(processes):
            process.terminate()
        for _, process, _ in reversed(processes):
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
