#!/usr/bin/env python3
"""Peak memory of the server for one large body (SageMaker async inference: up to 1 GB).

Starts build/bin/server with the deterministic statistics test predictor, waits for /ping,
reads VmRSS from /proc, sends one body (a noise PNG stored without compression, so the body
is as large as its decoded pixels), reads VmHWM (the peak) and prints peak - before as a
multiple of the body. Each (server, body form) pair gets a fresh server. Forms: the raw PNG
(image/png), the PNG base64 in {"image": ...} (application/json), and the same as one JSON
line (application/jsonlines). With --baseline BINARY the same bodies go to another server
binary in the same run (e.g. one built from the commit before; it may refuse JSON Lines).

  .venv/bin/python bench/serving/bench_large_body.py [--side 6000] [--baseline PATH]
"""
import argparse
import base64
import http.client
import json
import os
import pathlib
import struct
import subprocess
import tempfile
import time
import zlib

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]


def noise_png(side):
    rng = np.random.default_rng(7)
    rows = np.zeros((side, 1 + side * 3), dtype=np.uint8)  # filter byte 0 per row
    rows[:, 1:] = rng.integers(0, 256, size=(side, side * 3), dtype=np.uint8)

    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data +
                struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    ihdr = struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) +
            chunk(b"IDAT", zlib.compress(rows.tobytes(), 0)) + chunk(b"IEND", b""))


def proc_bytes(pid, field):
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field}")


def measure(binary, content_type, body):
    with tempfile.TemporaryDirectory() as tmp:
        model = pathlib.Path(tmp, "model")
        model.mkdir()
        (model / "statistics_predictor.json").write_text("{}")
        port_file = pathlib.Path(tmp, "port")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SAGEMAKER_", "SM_"))}
        env["SAGEMAKER_MAX_PAYLOAD_IN_MB"] = "1024"
        server = subprocess.Popen([binary, "--host", "127.0.0.1", "--port", "0", "--port-file",
                                   str(port_file), "--model-dir", str(model), "--predictor",
                                   "statistics", "--max-payload-mb", "1024"],
                                  env=env, stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        try:
            while not port_file.exists():
                time.sleep(0.02)
            port = int(port_file.read_text())
            while True:
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
                try:
                    connection.request("GET", "/ping")
                    if connection.getresponse().status == 200:
                        break
                except OSError:
                    pass
                time.sleep(0.05)
            before = proc_bytes(server.pid, "VmRSS")
            start = time.monotonic()
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
            connection.request("POST", "/invocations", body,
                               {"Content-Type": content_type,
                                "X-Amzn-SageMaker-Custom-Attributes": "masks=none"})
            response = connection.getresponse()
            answer = response.read()
            seconds = time.monotonic() - start
            peak = proc_bytes(server.pid, "VmHWM")
            return response.status, answer, before, peak, seconds
        finally:
            server.kill()
            server.wait()


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--side", type=int, default=6000, help="noise PNG side (default 6000)")
    parser.add_argument("--server", default=str(ROOT / "build" / "bin" / "server"))
    parser.add_argument("--baseline", help="another server binary to measure alike")
    args = parser.parse_args()

    png = noise_png(args.side)
    encoded = base64.b64encode(png).decode()
    forms = [("image/png", png),
             ("application/json", json.dumps({"image": encoded}).encode()),
             ("application/jsonlines", (json.dumps({"image": encoded, "id": 1}) + "\n").encode())]
    del encoded
    mib = 1 << 20
    print(f"{args.side}x{args.side} noise PNG: {len(png) / mib:.1f} MiB, "
          f"{args.side * args.side * 3 / mib:.1f} MiB of pixels; {os.cpu_count()} cores")
    print("| server | body | body MiB | status | RSS before MiB | peak MiB | peak - before | "
          "x body | seconds |")
    print("|---|---|---|---|---|---|---|---|---|")
    servers = [("ours", args.server)] + ([("baseline", args.baseline)] if args.baseline else [])
    for content_type, body in forms:
        for name, binary in servers:
            status, _, before, peak, seconds = measure(binary, content_type, body)
            print(f"| {name} | {content_type} | {len(body) / mib:.1f} | {status} | "
                  f"{before / mib:.1f} | {peak / mib:.1f} | {(peak - before) / mib:.1f} | "
                  f"{(peak - before) / len(body):.2f} | {seconds:.2f} |", flush=True)


if __name__ == "__main__":
    main()
