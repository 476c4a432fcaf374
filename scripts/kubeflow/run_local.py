#!/usr/bin/env python3
"""Runs scripts/kubeflow/container_pipeline.py's shapes pipeline end to end with kfp.local and
DockerRunner through podman, then checks what each step made.

    .venv/bin/python scripts/kubeflow/run_local.py --work DIR [--opts "..."] [--min-box-ap50 X]

Needs the training and serving images (scripts/test-containers.sh or the README's
`docker build` lines; podman names them localhost/NAME:latest) and rootful podman. Without
DOCKER_HOST it starts `podman system service` on a socket in DIR for the run and stops it
after. Every step runs with --network none and is removed when it ends.

Checks: the model artifact holds model.safetensors, config.yaml and classes.json; the metrics
artifact has box and mask AP, AP50, AP75 in [0, 1] and box AP50 at least --min-box-ap50; the
serving smoke test's answer is the contract's JSON for its image (height, width, a list of
detections with box, label, category_id, score). Prints each step's time. Exits 1 naming the
step and showing its container's last lines when a step fails, 1 when a check fails.

How kfp.local runs a container is replaced here (kfp 2.17's own removes the container as it
exits, and podman 4.3 answers the following wait with a 500 that kfp does not expect; and it
keeps the image's ENTRYPOINT). Ours runs the component's command as Kubernetes does (its
first word is the entrypoint), waits for the exit code, keeps the last lines, then removes
the container.
"""
import argparse
import collections
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import container_pipeline  # noqa: E402

TAIL_LINES = 40


def log(message: str) -> None:
    print(f"[run-local] {message}", flush=True)


class StepRecord:
    """What one container step did: name, seconds, exit code, last lines, executor output."""

    def __init__(self, name: str):
        self.name = name
        self.seconds = 0.0
        self.exit_code = None
        self.tail = collections.deque(maxlen=TAIL_LINES)
        self.executor_output = None


class ContainerSteps:
    """Replaces kfp.local.docker_task_handler.run_docker_container (same signature)."""

    def __init__(self, prefix: str):
        self.prefix = prefix
        self.steps = []

    def __call__(self, client, image, command, volumes, **run_args) -> int:
        from kfp.local import docker_task_handler

        environment = dict(run_args.pop("environment", None) or {})
        step = StepRecord(environment.get("MRCNN_PIPELINE_STEP", f"step-{len(self.steps) + 1}"))
        self.steps.append(step)
        step.executor_output = next((a for a in command if a.endswith("executor_output.json")), None)
        image = docker_task_handler.add_latest_tag_if_not_present(image)
        if not client.images.list(name=image):
            step.exit_code = 125
            step.tail.append(f"image {image} is not here: build it first (README, Containers)")
            return step.exit_code
        name = f"{self.prefix}-{step.name}"
        log(f"step {step.name}: {image} {command[0]} ... (container {name})")
        start = time.monotonic()
        container = client.containers.run(image=image, entrypoint=command[:1], command=command[1:], name=name,
                                          detach=True, volumes=volumes, environment=environment, **run_args)
        try:
            pending = b""
            for chunk in container.logs(stream=True, follow=True):
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    text = line.decode(errors="replace").rstrip("\r")
                    step.tail.append(text)
                    print(f"    [{step.name}] {text}", flush=True)
            if pending:
                step.tail.append(pending.decode(errors="replace"))
            step.exit_code = container.wait()["StatusCode"]
        finally:
            step.seconds = time.monotonic() - start
            container.remove(force=True)
        log(f"step {step.name}: exit {step.exit_code} in {step.seconds:.1f} s")
        return step.exit_code


def start_podman_service(work: pathlib.Path):
    """A podman API socket in WORK for the run; returns (process, DOCKER_HOST)."""
    if not shutil.which("podman"):
        raise SystemExit("run-local: podman is not installed (scripts/containers/podman-setup.sh installs it)")
    sock = work / "podman.sock"
    sock.unlink(missing_ok=True)
    service = subprocess.Popen(["podman", "system", "service", "--time=0", f"unix://{sock}"],
                               stdout=subprocess.DEVNULL, stderr=open(work / "podman-service.log", "w"))
    for _ in range(300):
        if sock.exists():
            return service, f"unix://{sock}"
        if service.poll() is not None:
            break
        time.sleep(0.1)
    service.kill()
    raise SystemExit(f"run-local: podman system service did not open {sock} (log: {work / 'podman-service.log'})")


def load_executor_output(step: StepRecord) -> dict:
    if not step.executor_output or not os.path.isfile(step.executor_output):
        raise CheckFailed(f"step {step.name} wrote no executor_output.json")
    return json.load(open(step.executor_output))


def artifact(step: StepRecord, name: str) -> dict:
    found = load_executor_output(step).get("artifacts", {}).get(name, {}).get("artifacts", [])
    if len(found) != 1:
        raise CheckFailed(f"step {step.name}: executor_output.json has no artifact {name!r}")
    return found[0]


def local_path(uri: str) -> pathlib.Path:
    # kfp.local's artifact URIs are local paths (the pipeline root is a folder here).
    return pathlib.Path(uri[len("file://"):] if uri.startswith("file://") else uri)


class CheckFailed(Exception):
    pass


def check_outputs(steps: dict, min_box_ap50: float) -> list:
    """What each step made; returns the lines that say what was checked."""
    said = []
    model = local_path(artifact(steps["train"], "model")["uri"])
    for f in ("model.safetensors", "config.yaml", "classes.json"):
        if not (model / f).is_file() or (model / f).stat().st_size == 0:
            raise CheckFailed(f"step train: the model artifact {model} has no {f}")
    classes = json.load(open(model / "classes.json"))
    said.append(f"train: model artifact {model.name}/ with model.safetensors "
                f"({(model / 'model.safetensors').stat().st_size / 1e6:.1f} MB), config.yaml, classes.json")

    metrics = artifact(steps["evaluate"], "metrics")["metadata"]
    for key in ("box_AP", "box_AP50", "box_AP75", "mask_AP", "mask_AP50", "mask_AP75"):
        value = metrics.get(key)
        if not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
            raise CheckFailed(f"step evaluate: metric {key} is {value!r}, not a number in [0, 1]")
    if metrics["box_AP50"] < min_box_ap50:
        raise CheckFailed(f"step evaluate: box AP50 {metrics['box_AP50']} is below --min-box-ap50 {min_box_ap50}")
    said.append("evaluate: " + ", ".join(f"{k} {v:.4f}" for k, v in metrics.items()) +
                f" (box AP50 floor {min_box_ap50})")

    answer_dir = local_path(artifact(steps["serve-smoke"], "answer")["uri"])
    answer = json.load(open(answer_dir / "answer.json"))
    images = [p for p in answer_dir.iterdir() if p.suffix in (".jpg", ".png")]
    if len(images) != 1:
        raise CheckFailed(f"step serve-smoke: expected the image it sent beside answer.json, found {images}")
    from PIL import Image
    width, height = Image.open(images[0]).size
    if (answer.get("width"), answer.get("height")) != (width, height):
        raise CheckFailed(f"step serve-smoke: answer is for {answer.get('width')}x{answer.get('height')}, "
                          f"the image is {width}x{height}")
    detections = answer.get("detections")
    if not isinstance(detections, list):
        raise CheckFailed(f"step serve-smoke: no detections list in {answer_dir / 'answer.json'}")
    names = set(classes.values()) if isinstance(classes, dict) else {c.get("name") for c in classes}
    for d in detections:
        box = d.get("box")
        if not (isinstance(box, list) and len(box) == 4 and box[0] <= box[2] and box[1] <= box[3]):
            raise CheckFailed(f"step serve-smoke: a detection's box is {box!r}")
        if not 0.0 <= d.get("score", -1) <= 1.0 or d.get("label") not in names:
            raise CheckFailed(f"step serve-smoke: a detection is {d!r} (labels: {sorted(names)})")
    said.append(f"serve-smoke: /ping 200, /invocations 200 for {images[0].name} ({width}x{height}): "
                f"{len(detections)} detections, labels from classes.json, boxes and scores well formed")
    return said


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", required=True, type=pathlib.Path, help="folder for the pipeline root and logs")
    parser.add_argument("--training-image", default=container_pipeline.DEFAULT_TRAINING_IMAGE)
    parser.add_argument("--serving-image", default=container_pipeline.DEFAULT_SERVING_IMAGE)
    parser.add_argument("--train-images", type=int, default=400)
    parser.add_argument("--val-images", type=int, default=50)
    parser.add_argument("--config-file", default="mask_rcnn_R_50_FPN_shapes_cpu.yaml")
    parser.add_argument("--opts", default="", help="Detectron2-style KEY VALUE overrides for the train step")
    parser.add_argument("--min-box-ap50", type=float, default=0.0,
                        help="the evaluate step fails below this box AP50 (a pipeline gate), and so does this check")
    parser.add_argument("--expect-failure", metavar="STEP",
                        help="the run must fail at STEP, with its container's lines printed (tests the failure path)")
    args = parser.parse_args(argv)

    import docker  # noqa: F401  (DockerRunner needs it; say so before anything starts)
    from kfp import local
    from kfp.local import docker_task_handler

    args.work = args.work.resolve()
    args.work.mkdir(parents=True, exist_ok=True)
    service = None
    if not os.environ.get("DOCKER_HOST"):
        service, os.environ["DOCKER_HOST"] = start_podman_service(args.work)
    steps = ContainerSteps(prefix=f"mrcnn-kfp-{os.getpid()}")
    docker_task_handler.run_docker_container = steps
    # SIGTERM runs the finally blocks: the running step's container is removed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    start = time.monotonic()
    try:
        local.init(runner=local.DockerRunner(network_mode="none"), pipeline_root=str(args.work / "pipeline-root"),
                   raise_on_error=False)
        shapes_pipeline, _ = container_pipeline.build_pipelines(args.training_image, args.serving_image)
        shapes_pipeline(train_images=args.train_images, val_images=args.val_images, config_file=args.config_file,
                        opts=args.opts, min_box_ap50=args.min_box_ap50)
    finally:
        if service is not None:
            service.terminate()
            service.wait()
    total = time.monotonic() - start
    log("steps:")
    for step in steps.steps:
        print(f"  {step.seconds:8.1f} s  {step.name}: exit {step.exit_code}")
    failed = next((s for s in steps.steps if s.exit_code != 0), None)
    if failed is not None:
        log(f"FAILED: step {failed.name} exited {failed.exit_code} after {failed.seconds:.1f} s; "
            f"its container's last lines:")
        for line in failed.tail:
            print(f"    {line}")
        if args.expect_failure == failed.name:
            log(f"OK: failed at step {failed.name} as expected, its lines shown")
            return 0
        return 1
    if args.expect_failure:
        log(f"FAILED: expected step {args.expect_failure} to fail; every step passed")
        return 1
    expected = ["dataset", "train", "evaluate", "serve-smoke"]
    ran = [s.name for s in steps.steps]
    if sorted(ran) != sorted(expected):
        log(f"FAILED: the steps that ran were {ran}, not {expected}")
        return 1
    try:
        said = check_outputs({s.name: s for s in steps.steps}, args.min_box_ap50)
    except CheckFailed as e:
        log(f"FAILED: {e}")
        return 1
    for line in said:
        log(f"checked: {line}")
    log(f"OK: pipeline mrcnn-shapes-train-eval passed in {total:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
