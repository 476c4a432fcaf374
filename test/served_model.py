"""The model server and `trainer predict` as the tests drive them, written once.

ModelServer runs `build/bin/server --predictor model` on 127.0.0.1 (a port the kernel picks,
read from --port-file), batches of one and one intra-op thread: the server's default on a CPU
is several single-threaded workers, and another thread count changes float sums in the last
bits (scores ~1e-6), which is not what the comparisons are about. It waits for /ping at most
`ready_timeout` seconds, and stopping it sends SIGTERM and requires exit 0 within a minute.
predicted_detections runs `trainer predict` with one thread on the same images, and
assert_same_detections compares the two answers: category, score, box and RLE mask.
"""
import itertools
import json
import os
import pathlib
import signal
import subprocess
import time
import urllib.error
import urllib.request

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
BUILD = pathlib.Path(os.environ.get("MRCNN_BUILD_DIR", ROOT / "build"))
ATTRIBUTES_HEADER = "X-Amzn-SageMaker-Custom-Attributes"
_port_files = itertools.count()


class ModelServer:
    """`with ModelServer(model_dir, workdir, *flags) as server:` ...; flags are the server's
    own (e.g. "--precision", "fp32"), env adds to this process's environment. predictor:
    "statistics" for the deterministic test predictor; wait_ready=False returns once the port
    is known, before /ping answers 200."""

    def __init__(self, model_dir, workdir, *flags, env=None, ready_timeout=300, predictor="model", wait_ready=True):
        port_file = pathlib.Path(workdir) / f"server-port-{os.getpid()}-{next(_port_files)}"
        port_file.unlink(missing_ok=True)
        self.proc = subprocess.Popen(
            [str(BUILD / "bin" / "server"), "--host", "127.0.0.1", "--port", "0", "--port-file", str(port_file),
             "--model-dir", str(model_dir), "--predictor", predictor, "--max-batch", "1", "--num-threads", "1",
             *flags],
            env={**os.environ, **(env or {})}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            deadline = time.time() + ready_timeout
            self.url = None
            while self.url is None or (wait_ready and not self.ping()):
                assert self.proc.poll() is None, self.proc.stderr.read().decode()[-3000:]
                assert time.time() < deadline, "server never became ready"
                if self.url is None and port_file.exists():
                    self.url = f"http://127.0.0.1:{int(port_file.read_text())}"
                time.sleep(0.1)
        except BaseException:
            self.proc.kill()
            self.proc.wait(timeout=60)
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def ping(self) -> bool:
        try:
            with urllib.request.urlopen(self.url + "/ping", timeout=5) as reply:
                return reply.status == 200
        except OSError:
            return False

    def invoke(self, body: bytes, content_type="image/png", attributes=None, timeout=600):
        """(status, reply body as text) of one /invocations request, error statuses included."""
        headers = {"Content-Type": content_type}
        if attributes is not None:
            headers[ATTRIBUTES_HEADER] = attributes
        request = urllib.request.Request(self.url + "/invocations", data=body, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=timeout) as reply:
                return reply.status, reply.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def invoke_json(self, body: bytes, content_type="image/png", attributes=None):
        status, text = self.invoke(body, content_type, attributes)
        return status, json.loads(text)

    def detections(self, images, attributes=None) -> list:
        """Each image's "detections", one request per image."""
        answers = []
        for path in images:
            status, answer = self.invoke_json(pathlib.Path(path).read_bytes(), attributes=attributes)
            assert status == 200, answer
            answers.append(answer["detections"])
        return answers

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(timeout=60) == 0


def served_detections(model_dir, images, workdir, *flags, attributes=None) -> list:
    """Each image's detections from a server started for these requests alone."""
    with ModelServer(model_dir, workdir, *flags) as server:
        return server.detections(images, attributes)


def predicted_detections(model_dir, images, out, *flags) -> list:
    """`trainer predict`'s results on `images` (written to `out`), one list per image."""
    run = subprocess.run([str(BUILD / "bin" / "trainer"), "predict", "--model-dir", str(model_dir), "--images",
                          *map(str, images), "--output", str(out), "--threads", "1", *flags],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    results = json.loads(pathlib.Path(out).read_text())
    return [[r for r in results if r["image_id"] == i] for i in range(1, len(images) + 1)]


def assert_same_images(served_images: list, predicted_images: list):
    """Every image's /invocations detections against `trainer predict`'s, image by image; each
    image must have detections, or the comparison would prove nothing."""
    assert len(served_images) == len(predicted_images)
    for got_image, want_image in zip(served_images, predicted_images):
        assert len(want_image) > 0
        assert_same_detections(got_image, want_image)


def assert_same_detections(served_image: list, predicted_image: list):
    """One image's /invocations detections against `trainer predict`'s COCO results for it:
    the same order, categories, scores (1e-6), boxes (xyxy against xywh, 1e-3) and, where
    predict wrote a mask, the same RLE; where it wrote none, the server answers none."""
    assert len(served_image) == len(predicted_image)
    for got, want in zip(served_image, predicted_image):
        assert got["category_id"] == want["category_id"]
        assert got["score"] == pytest.approx(want["score"], abs=1e-6)
        x, y, w, h = want["bbox"]
        assert got["box"] == pytest.approx([x, y, x + w, y + h], abs=1e-3)
        if "segmentation" in want:
            assert got["mask"]["size"] == want["segmentation"]["size"]
            assert got["mask"]["counts"] == want["segmentation"]["counts"]
        else:
            assert "mask" not in got
