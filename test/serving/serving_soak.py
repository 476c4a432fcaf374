#!/usr/bin/env python3
"""Soak and storm driver for build/bin/server, on loopback only.

Starts the real server (the deterministic statistics predictor with a per-image delay, or a
real model dir), then for `duration` seconds runs client threads that each loop over a seeded
random mix of request kinds: good ones (PNG, JPEG, JSON lists, keep-alive sequences, a body of
exactly the payload limit), bad ones (undecodable, bad JSON, wrong route, method, media type,
attributes, an image header over the size limit, a body one byte over the limit) and slow or
rude ones (headers or a body dripped in within the timeouts, slowloris connections that never
finish their headers, clients that vanish mid-body or before their answer). Meanwhile a
separate process GETs /ping on a fresh connection every `ping_interval` seconds, another one
at the same moments on an idle control server (the same binary, no traffic: it shows the
machine's own stalls), and the server's RSS is sampled from /proc. Then a storm:
`storm_connections` requests sent at once, far beyond --queue-capacity and --max-inflight,
each of which must be answered (200 or 503) within `storm_timeout`.

run_soak() returns the figures; the checks (no crash, every kind answered as the contract
says, RSS within the bound after warm-up, every ping 200, none over the bound unless the
control's was slow too and none over 1 s, the storm answered with 503s and no hang, the
server still answering after it) are in `failures`. test_server_soak.py runs a short soak in CI,
bench/serving/bench_soak.py the 10-minute one.

  .venv/bin/python test/serving/serving_soak.py --duration 60 [--server build/bin/server]
"""
import argparse
import base64
import io
import json
import multiprocessing
import os
import pathlib
import random
import selectors
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time
import zlib

import numpy as np
from PIL import Image

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("MRCNN_BUILD_DIR", str(ROOT / "build")))

HEADER_TIMEOUT_S = 2.0
BODY_TIMEOUT_S = 3.0
QUEUE_CAPACITY = 16
MAX_INFLIGHT = 32
PAYLOAD_MB = 6  # the default, SageMaker's


# --- request bodies ------------------------------------------------------------------------

def make_image(rng, width, height, fmt):
    rgb = rng.integers(0, 60, size=(height, width, 3), dtype=np.uint8)
    for _ in range(3):
        x0, y0 = int(rng.integers(0, width // 2)), int(rng.integers(0, height // 2))
        rgb[y0:y0 + height // 3, x0:x0 + width // 3] = rng.integers(80, 256, size=3)
    buffer = io.BytesIO()
    Image.fromarray(rgb).save(buffer, fmt)
    return buffer.getvalue()


def png_claiming(width, height):
    """A PNG signature and IHDR chunk (valid CRC) for a huge image, and nothing else."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunk = struct.pack(">I", len(ihdr)) + b"IHDR" + ihdr + struct.pack(">I", zlib.crc32(b"IHDR" + ihdr))
    return b"\x89PNG\r\n\x1a\n" + chunk


class Bodies:
    def __init__(self, seed):
        rng = np.random.default_rng(seed)
        self.pngs = [make_image(rng, w, h, "PNG") for w, h in [(64, 48), (160, 120), (320, 240)]]
        self.jpegs = [make_image(rng, w, h, "JPEG") for w, h in [(64, 48), (320, 240), (640, 480)]]
        b64 = [base64.b64encode(p).decode() for p in self.pngs]
        self.json_list = json.dumps({"instances": [{"image": b} for b in b64]}).encode()
        limit = PAYLOAD_MB << 20
        single = json.dumps({"image": b64[1]}).encode()
        # JSON allows whitespace after the value: pad to exactly the limit.
        self.at_limit = single + b" " * (limit - len(single))
        self.over_limit_length = limit + 1
        self.huge = png_claiming(50000, 50000)


# --- a minimal HTTP/1.1 client over raw sockets (slow and rude clients need the control) ----

class Closed(Exception):
    pass


def connect(port, timeout=30.0):
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def request_bytes(method, path, body=b"", headers=None, content_length=None):
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1"]
    for key, value in (headers or {}).items():
        lines.append(f"{key}: {value}")
    if body or content_length is not None or method == "POST":
        lines.append(f"Content-Length: {len(body) if content_length is None else content_length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode(), body


def read_response(sock, buffer=b""):
    """(status, headers, body, leftover). Raises Closed when the server closes first."""
    while b"\r\n\r\n" not in buffer:
        chunk = sock.recv(65536)
        if not chunk:
            raise Closed()
        buffer += chunk
    head, _, rest = buffer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        key, _, value = line.partition(":")
        headers[key.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            raise Closed()
        rest += chunk
    return status, headers, rest[:length], rest[length:]


def exchange(port, method, path, body=b"", headers=None):
    with connect(port) as sock:
        head, body = request_bytes(method, path, body, headers)
        sock.sendall(head + body)
        status, response_headers, response_body, _ = read_response(sock)
        return status, response_headers, response_body


# --- the request kinds: each returns an outcome label (a status code or what happened) -------

def image_post(port, body, content_type, attributes=None):
    headers = {"Content-Type": content_type}
    if attributes:
        headers["X-Amzn-SageMaker-Custom-Attributes"] = attributes
    status, _, payload = exchange(port, "POST", "/invocations", body, headers)
    if status == 200:
        json.loads(payload)  # a 200 must carry JSON
    return status


def kind_good_png(ctx):
    return image_post(ctx.port, ctx.rng.choice(ctx.bodies.pngs), "image/png", "score_threshold=0.1")


def kind_good_jpeg(ctx):
    return image_post(ctx.port, ctx.rng.choice(ctx.bodies.jpegs), "image/jpeg")


def kind_good_list(ctx):
    status, _, payload = exchange(ctx.port, "POST", "/invocations", ctx.bodies.json_list,
                                  {"Content-Type": "application/json"})
    if status == 200 and len(json.loads(payload)["predictions"]) != 3:
        return "200 with a wrong prediction count"
    return status


def kind_keepalive(ctx):
    """Three requests on one connection: each must be answered on it."""
    statuses = []
    with connect(ctx.port) as sock:
        leftover = b""
        for path, method, body, headers in [
                ("/ping", "GET", b"", {}),
                ("/invocations", "POST", ctx.rng.choice(ctx.bodies.pngs), {"Content-Type": "image/png"}),
                ("/execution-parameters", "GET", b"", {})]:
            head, body = request_bytes(method, path, body, headers)
            sock.sendall(head + body)
            status, _, _, leftover = read_response(sock, leftover)
            statuses.append(status)
    return 200 if statuses == [200, 200, 200] else f"keep-alive {statuses}"


def kind_bad_image(ctx):
    return image_post(ctx.port, b"\xff\xd8\xff this is not a JPEG" * 10, "image/jpeg")


def kind_bad_json(ctx):
    return image_post(ctx.port, b'{"image": "not base64 at all!!"', "application/json")


def kind_bad_route(ctx):
    return exchange(ctx.port, "GET", "/nowhere")[0]


def kind_bad_method(ctx):
    return exchange(ctx.port, "DELETE", "/invocations")[0]


def kind_bad_media(ctx):
    return image_post(ctx.port, b"a,b,c\n1,2,3\n", "text/csv")


def kind_bad_attributes(ctx):
    return image_post(ctx.port, ctx.bodies.pngs[0], "image/png", "score_threshold=lots")


def kind_huge_dims(ctx):
    return image_post(ctx.port, ctx.bodies.huge, "image/png")


def kind_at_limit(ctx):
    return image_post(ctx.port, ctx.bodies.at_limit, "application/json")


def kind_over_limit(ctx):
    """Content-Length one byte over the limit: 413 from the headers, before the body."""
    with connect(ctx.port) as sock:
        head, _ = request_bytes("POST", "/invocations", headers={"Content-Type": "image/png"},
                                content_length=ctx.bodies.over_limit_length)
        sock.sendall(head + b"\0" * 65536)
        return read_response(sock)[0]


def kind_slow_headers(ctx):
    """Headers dripped in over ~40% of the header timeout: still answered."""
    body = ctx.bodies.pngs[0]
    head, _ = request_bytes("POST", "/invocations", body, {"Content-Type": "image/png"})
    with connect(ctx.port) as sock:
        pieces = [head[i:i + len(head) // 4 + 1] for i in range(0, len(head), len(head) // 4 + 1)]
        for piece in pieces:
            sock.sendall(piece)
            time.sleep(HEADER_TIMEOUT_S * 0.4 / len(pieces))
        sock.sendall(body)
        return read_response(sock)[0]


def kind_slow_body(ctx):
    """A body dripped in over ~40% of the body timeout: still answered."""
    body = ctx.bodies.pngs[1]
    head, _ = request_bytes("POST", "/invocations", body, {"Content-Type": "image/png"})
    with connect(ctx.port) as sock:
        sock.sendall(head)
        step = len(body) // 4 + 1
        for i in range(0, len(body), step):
            sock.sendall(body[i:i + step])
            time.sleep(BODY_TIMEOUT_S * 0.4 / 4)
        return read_response(sock)[0]


def kind_slowloris(ctx):
    """Ten connections that never finish their headers: each must be closed by the server
    within the header timeout (plus slack), without an answer."""
    socks = [connect(ctx.port) for _ in range(10)]
    started = time.monotonic()
    try:
        for sock in socks:
            sock.sendall(b"POST /invocations HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        open_socks = list(socks)
        while open_socks and time.monotonic() - started < HEADER_TIMEOUT_S + 3.0:
            still = []
            for sock in open_socks:
                try:
                    sock.sendall(b"X-Slow: a\r\n")
                    still.append(sock)
                except OSError:
                    pass  # closed by the server: what we want
            open_socks = still
            time.sleep(0.25)
            # A closed connection reads as EOF (or a reset) at once.
            still = []
            for sock in open_socks:
                sock.setblocking(False)
                try:
                    if sock.recv(4096) == b"":
                        continue
                    still.append(sock)  # bytes: an answer we did not expect
                except BlockingIOError:
                    still.append(sock)
                except OSError:
                    pass
                finally:
                    sock.setblocking(True)
            open_socks = still
        return "closed" if not open_socks else f"{len(open_socks)} of 10 left open"
    finally:
        for sock in socks:
            sock.close()


def kind_vanish_mid_body(ctx):
    body = ctx.bodies.jpegs[2]
    head, _ = request_bytes("POST", "/invocations", body, {"Content-Type": "image/jpeg"})
    sock = connect(ctx.port)
    if ctx.rng.random() < 0.5:  # half of them reset rather than close
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.sendall(head + body[:len(body) // 2])
    sock.close()
    return "vanished"


def kind_vanish_before_answer(ctx):
    body = ctx.rng.choice(ctx.bodies.pngs)
    head, _ = request_bytes("POST", "/invocations", body, {"Content-Type": "image/png"})
    sock = connect(ctx.port)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.sendall(head + body)
    sock.close()
    return "vanished"


# kind: (function, weight, expected outcome)
KINDS = {
    "good_png": (kind_good_png, 8, 200),
    "good_jpeg": (kind_good_jpeg, 6, 200),
    "good_json_list": (kind_good_list, 3, 200),
    "keep_alive_sequence": (kind_keepalive, 3, 200),
    "at_payload_limit": (kind_at_limit, 1, 200),
    "over_payload_limit": (kind_over_limit, 1, 413),
    "undecodable_image": (kind_bad_image, 2, 400),
    "bad_json": (kind_bad_json, 2, 400),
    "unknown_route": (kind_bad_route, 1, 404),
    "wrong_method": (kind_bad_method, 1, 405),
    "unsupported_media": (kind_bad_media, 1, 415),
    "bad_attributes": (kind_bad_attributes, 1, 400),
    "image_too_large": (kind_huge_dims, 1, 400),
    "slow_headers": (kind_slow_headers, 2, 200),
    "slow_body": (kind_slow_body, 2, 200),
    "slowloris_x10": (kind_slowloris, 1, "closed"),
    "vanish_mid_body": (kind_vanish_mid_body, 2, "vanished"),
    "vanish_before_answer": (kind_vanish_before_answer, 2, "vanished"),
}


class Context:
    def __init__(self, port, bodies, seed):
        self.port = port
        self.bodies = bodies
        self.rng = random.Random(seed)


# --- ping prober: its own process, so the clients' GIL never delays its clock ----------------

def ping_once(port):
    began = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"GET /ping HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        status = read_response(sock)[0]
    return status, time.perf_counter() - began


def ping_prober(port, start_at, interval, stop, results):
    """GET /ping on a fresh connection at start_at + i * interval (the monotonic clock is
    the machine's, so two probers tick together); returns [(i, seconds or None)], failures."""
    latencies, failures = [], []
    tick = 0
    while not stop.is_set():
        time.sleep(max(0.0, start_at + tick * interval - time.monotonic()))
        try:
            status, elapsed = ping_once(port)
            latencies.append((tick, elapsed))
            if status != 200:
                failures.append(f"status {status}")
        except (OSError, Closed, ValueError) as e:
            latencies.append((tick, None))
            failures.append(f"{type(e).__name__}: {e}")
        tick = max(tick + 1, int((time.monotonic() - start_at) / interval) + 1)
    results.put((latencies, failures))


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


# --- the storm ------------------------------------------------------------------------------

def storm(port, connections, body, timeout):
    """Sends `connections` requests at once; returns ({outcome: count}, seconds to the last answer)."""
    selector = selectors.DefaultSelector()
    head, body = request_bytes("POST", "/invocations", body, {"Content-Type": "image/png"})
    socks = []
    outcomes = {}
    try:
        for _ in range(connections):
            sock = connect(port, timeout=timeout)
            socks.append(sock)
        began = time.monotonic()
        for sock in socks:
            sock.sendall(head + body)
            sock.setblocking(False)
            selector.register(sock, selectors.EVENT_READ, data=bytearray())
        pending = len(socks)
        while pending and time.monotonic() - began < timeout:
            for key, _ in selector.select(timeout=0.5):
                buffer = key.data
                try:
                    chunk = key.fileobj.recv(65536)
                except OSError:
                    chunk = b""
                if chunk:
                    buffer += chunk
                    if b"\r\n\r\n" not in buffer:
                        continue
                    head_part, _, rest = bytes(buffer).partition(b"\r\n\r\n")
                    lengths = [int(line.split(b":", 1)[1]) for line in head_part.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")]
                    if len(rest) < (lengths[0] if lengths else 0):
                        continue
                    outcome = int(head_part.split(b" ", 2)[1])
                else:
                    outcome = "closed without an answer"
                outcomes[outcome] = outcomes.get(outcome, 0) + 1
                selector.unregister(key.fileobj)
                pending -= 1
        elapsed = time.monotonic() - began
        if pending:
            outcomes["no answer (hang)"] = pending
        return outcomes, elapsed
    finally:
        selector.close()
        for sock in socks:
            sock.close()


# --- the run --------------------------------------------------------------------------------

def start_server(server, model_dir, extra_args, tmp, image_delay_ms):
    tmp.mkdir()
    if model_dir is None:
        model_dir = tmp / "model"
        model_dir.mkdir()
        (model_dir / "statistics_predictor.json").write_text(json.dumps({"image_delay_ms": image_delay_ms}))
    port_file = tmp / "port"
    log = open(tmp / "server.log", "wb")
    command = [str(server), "--host", "127.0.0.1", "--port", "0", "--port-file", str(port_file),
               "--model-dir", str(model_dir), "--header-timeout-s", str(HEADER_TIMEOUT_S),
               "--body-timeout-s", str(BODY_TIMEOUT_S), "--queue-capacity", str(QUEUE_CAPACITY),
               "--max-inflight", str(MAX_INFLIGHT), "--max-payload-mb", str(PAYLOAD_MB), *extra_args]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log)
    deadline = time.monotonic() + 300
    port = None
    while time.monotonic() < deadline and process.poll() is None:
        if port is None and port_file.exists():
            port = int(port_file.read_text())
        if port is not None:
            try:
                if exchange(port, "GET", "/ping")[0] == 200:
                    return process, port
            except (OSError, Closed):
                pass
        time.sleep(0.05)
    process.kill()
    process.wait()
    raise RuntimeError(f"the server never became ready: {(tmp / 'server.log').read_text()[-2000:]}")


def run_soak(duration=60.0, clients=6, server=None, model_dir=None, extra_args=(), seed=1,
             image_delay_ms=20, ping_interval=0.1, ping_bound_s=0.1, rss_bound=0.10,
             storm_connections=200, storm_timeout=60.0, warmup_fraction=0.2, log=print):
    server = pathlib.Path(server or BUILD / "bin" / "server")
    if not server.exists():
        raise FileNotFoundError(f"{server} is missing: build mrcnn_server first")
    bodies = Bodies(seed)
    failures = []
    rss_after_storm = None
    with tempfile.TemporaryDirectory(prefix="serving_soak_") as tmp_name:
        tmp = pathlib.Path(tmp_name)
        control, control_port = start_server(server, None, [], tmp / "control", image_delay_ms)
        process, port = start_server(server, model_dir, list(extra_args), tmp / "soaked", image_delay_ms)
        # Two probers in their own processes (the clients' GIL never delays their clocks),
        # ticking together: one on the soaked server, one on an idle control server (the same
        # binary, no other traffic). A slow ping that the control shares is the machine's.
        prober_stop = multiprocessing.Event()
        start_at = time.monotonic() + 0.5
        probers = []
        for probed in (port, control_port):
            results = multiprocessing.Queue()
            prober = multiprocessing.Process(target=ping_prober,
                                             args=(probed, start_at, ping_interval, prober_stop, results))
            prober.start()
            probers.append((prober, results))
        try:
            counts = {name: {} for name in KINDS}
            unexpected = []
            lock = threading.Lock()
            began = time.monotonic()
            end = began + duration

            def client(index):
                ctx = Context(port, bodies, seed * 1000 + index)
                names = list(KINDS)
                weights = [KINDS[n][1] for n in names]
                while time.monotonic() < end:
                    name = ctx.rng.choices(names, weights)[0]
                    function, _, expected = KINDS[name]
                    try:
                        outcome = function(ctx)
                    except (OSError, Closed, ValueError) as e:
                        outcome = f"{type(e).__name__}: {e}"
                    with lock:
                        counts[name][outcome] = counts[name].get(outcome, 0) + 1
                        if outcome != expected:
                            unexpected.append((round(time.monotonic() - began, 1), name, outcome))

            threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(clients)]
            for thread in threads:
                thread.start()
            rss = []
            while time.monotonic() < end and process.poll() is None:
                rss.append((time.monotonic() - began, rss_kib(process.pid)))
                time.sleep(0.5)
            for thread in threads:
                thread.join(timeout=HEADER_TIMEOUT_S + BODY_TIMEOUT_S + 30)
                if thread.is_alive():
                    failures.append("a client thread never finished: the server hangs")
            if process.poll() is not None:
                failures.append(f"the server exited with {process.returncode} during the soak")
            storm_outcomes, storm_seconds = ({}, 0.0)
            if process.poll() is None:
                storm_outcomes, storm_seconds = storm(port, storm_connections, bodies.pngs[1], storm_timeout)
            after_storm = {}
            if process.poll() is None:
                after_storm = {"ping": exchange(port, "GET", "/ping")[0],
                               "good_png": image_post(port, bodies.pngs[0], "image/png")}
                rss_after_storm = rss_kib(process.pid)
        finally:
            prober_stop.set()
            (ticks, ping_failures), (control_ticks, _) = [results.get(timeout=30) for _, results in probers]
            for prober, _ in probers:
                prober.join(timeout=10)
            control.kill()
            control.wait()
            alive = process.poll() is None
            if alive:
                process.send_signal(signal.SIGTERM)
                try:
                    exit_code = process.wait(timeout=40)
                except subprocess.TimeoutExpired:
                    process.kill()
                    exit_code = process.wait()
            else:
                exit_code = process.returncode
            server_log = (tmp / "soaked" / "server.log").read_text(errors="replace")

    if not alive:
        failures.append(f"the server crashed (exit {exit_code}); log tail: {server_log[-1500:]}")
    elif exit_code != 0:
        failures.append(f"SIGTERM after the soak: exit {exit_code}, not 0")
    for when, name, outcome in unexpected[:20]:
        failures.append(f"{name} at {when} s: {outcome!r}, expected {KINDS[name][2]!r}")
    if len(unexpected) > 20:
        failures.append(f"... {len(unexpected) - 20} more unexpected outcomes")
    for name, by_outcome in counts.items():
        if not by_outcome:
            failures.append(f"{name} never ran: lengthen the soak")

    warmup_end = duration * warmup_fraction
    measured = [kib for t, kib in rss if t >= warmup_end]
    baseline_window = [kib for t, kib in rss if warmup_end <= t < warmup_end + 5.0]
    figures = {"duration_s": duration, "clients": clients, "counts": counts}
    if measured and baseline_window:
        baseline = float(np.median(baseline_window))
        end_value = float(np.median([kib for t, kib in rss if t >= rss[-1][0] - 5.0]))
        figures["rss_kib"] = {"start": rss[0][1], "after_warmup": baseline, "end": end_value,
                              "min_after_warmup": min(measured), "max_after_warmup": max(measured),
                              "after_storm": rss_after_storm}
        figures["rss_drift_end_pct"] = 100.0 * (end_value - baseline) / baseline
        figures["rss_spread_pct"] = 100.0 * max(max(measured) - baseline, baseline - min(measured)) / baseline
        if figures["rss_spread_pct"] > 100.0 * rss_bound:
            failures.append(f"RSS left ±{100 * rss_bound:.0f}% of {baseline / 1024:.1f} MiB after warm-up: "
                            f"{min(measured) / 1024:.1f}..{max(measured) / 1024:.1f} MiB")
    else:
        failures.append("too few RSS samples after warm-up: lengthen the soak")
    latencies = [x for _, x in ticks if x is not None]
    control_latencies = [x for _, x in control_ticks if x is not None]
    if latencies and control_latencies:
        figures["ping"] = {"count": len(latencies), "failures": len(ping_failures),
                           "p50_ms": 1000 * float(np.percentile(latencies, 50)),
                           "p99_ms": 1000 * float(np.percentile(latencies, 99)),
                           "max_ms": 1000 * max(latencies)}
        figures["control_ping"] = {"count": len(control_latencies),
                                   "p50_ms": 1000 * float(np.percentile(control_latencies, 50)),
                                   "p99_ms": 1000 * float(np.percentile(control_latencies, 99)),
                                   "max_ms": 1000 * max(control_latencies),
                                   "over_bound": sum(x > ping_bound_s for x in control_latencies)}
        control_at = dict(control_ticks)
        pairs = [(x, control_at.get(tick)) for tick, x in ticks if x is not None and control_at.get(tick)]
        figures["ping"]["over_bound"] = sum(x > ping_bound_s for x in latencies)
        # Slow while the control, pinged at the same moment, was fast: the server's own delay.
        figures["ping"]["over_bound_control_fast"] = sum(x > ping_bound_s and c <= ping_bound_s / 2
                                                         for x, c in pairs)
        # On a shared machine the idle control sees the machine's own stalls; a slow ping that
        # the control did not share is the server's. Over a second is a failure regardless.
        if figures["ping"]["over_bound_control_fast"]:
            failures.append(f"{figures['ping']['over_bound_control_fast']} of {len(latencies)} pings took over "
                            f"{1000 * ping_bound_s:.0f} ms while the idle control answered within "
                            f"{500 * ping_bound_s:.0f} ms (max {1000 * max(latencies):.0f} ms)")
        if max(latencies) > 1.0:
            failures.append(f"a ping took {max(latencies):.2f} s")
    else:
        failures.append("no ping was answered")
    if ping_failures:
        failures.append(f"{len(ping_failures)} pings failed, e.g. {ping_failures[0]}")
    figures["storm"] = {"connections": storm_connections, "outcomes": {str(k): v for k, v in storm_outcomes.items()},
                        "seconds_to_last_answer": storm_seconds, "after_storm": after_storm}
    if alive:
        if set(storm_outcomes) - {200, 503}:
            failures.append(f"storm: outcomes other than 200 and 503: {storm_outcomes}")
        if storm_outcomes.get(503, 0) == 0:
            failures.append(f"storm: no 503 although {storm_connections} requests exceed the queue: {storm_outcomes}")
        if after_storm != {"ping": 200, "good_png": 200}:
            failures.append(f"after the storm: {after_storm}")
    figures["failures"] = failures
    return figures


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of mixed traffic before the storm")
    parser.add_argument("--clients", type=int, default=6)
    parser.add_argument("--server", type=pathlib.Path)
    parser.add_argument("--model-dir", type=pathlib.Path, help="a real model dir (default: the statistics predictor)")
    parser.add_argument("--storm", type=int, default=200, help="connections in the storm")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=pathlib.Path, help="write the figures here")
    parser.add_argument("server_args", nargs="*", help="more server flags, after --")
    args = parser.parse_args()
    figures = run_soak(args.duration, args.clients, args.server, args.model_dir, args.server_args, args.seed,
                       storm_connections=args.storm)
    text = json.dumps(figures, indent=1, default=str)
    print(text)
    if args.json:
        args.json.write_text(text)
    raise SystemExit(1 if figures["failures"] else 0)


if __name__ == "__main__":
    main()
