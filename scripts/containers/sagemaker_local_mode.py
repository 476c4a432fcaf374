"""SageMaker's own client against our images: the SageMaker Python SDK (v2) in local mode.

`Estimator(image_uri=TRAINING, instance_type="local").fit({"train": "file://..."})` runs the
training image the way the SDK runs any custom image (it writes the /opt/ml tree, starts the
container with docker-compose, tars /opt/ml/model into `output_path`/model.tar.gz), then
`Model(image_uri=SERVING, model_data=that tarball).deploy(instance_type="local")` and
`predict` on a JPEG go through the serving image (the SDK polls /ping, posts /invocations).
Then `Estimator(..., instance_count=2)`: two containers whose resourceconfig.json names the
SDK's hosts algo-1-xxxxx and algo-2-xxxxx; docker-compose gives each its host name as an alias
on the network it creates, and nothing else (no extra_hosts): the hosts find each other only
through that network's DNS, and train one data-parallel job.

Nothing leaves this machine:
- the SDK's telemetry (an HTTPS GET to AWS on every decorated call) is switched off by
  replacing its sender;
- a guard on socket connections refuses every address that is not loopback or a unix socket
  (the podman API socket); a refused attempt fails the run, naming the address;
- the serving container's port is published on 127.0.0.1 only (the SDK would publish it on
  every interface).
Dummy AWS credentials and a region are set, as the SDK needs them even in local mode.

Prints one `checked:` line per property verified and exits non-zero on the first failure.
Needs the `docker` CLI (this script's caller puts a shim running podman first on PATH) and
`docker-compose` talking to podman's Docker-compatible API (DOCKER_HOST).
"""
import argparse
import io
import ipaddress
import json
import os
import pathlib
import re
import socket
import sys
import tarfile
import time

REFUSED = []


def guard_network():
    """Refuse every connection that is not to loopback or a unix socket."""
    original = socket.socket.connect

    def allowed(address):
        if isinstance(address, (str, bytes)):  # AF_UNIX
            return True
        host = address[0]
        if host == "localhost":
            return True
        try:
            return ipaddress.ip_address(host).is_loopback
        except ValueError:
            return False

    def connect(self, address):
        if not allowed(address):
            REFUSED.append(address)
            raise ConnectionRefusedError(f"sagemaker_local_mode.py: refused a connection to {address!r}")
        return original(self, address)

    socket.socket.connect = connect


class Tee(io.TextIOBase):
    """sys.stdout that also keeps what is written (the SDK streams the containers' output there)."""

    def __init__(self, inner):
        self.inner, self.parts = inner, []

    def write(self, text):
        self.parts.append(text)
        return self.inner.write(text)

    def flush(self):
        self.inner.flush()

    def text(self):
        return "".join(self.parts)


def check(message):
    print(f"checked: {message}", flush=True)


def local_session(work, port, compose_hosts=None):
    """A LocalSession whose containers live under `work`/roots, with nothing leaving the
    machine: dummy credentials, the network guard, telemetry off, and the serving
    container's port published on 127.0.0.1:`port` only. Records each docker-compose
    service as (container_name, aliases, extra_hosts) in `compose_hosts` when given."""
    for key, value in {"AWS_ACCESS_KEY_ID": "local-mode-test", "AWS_SECRET_ACCESS_KEY": "local-mode-test",
                       "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true"}.items():
        os.environ[key] = value
    guard_network()

    import sagemaker.telemetry.telemetry_logging as telemetry
    from sagemaker.local import LocalSession
    from sagemaker.local.image import _SageMakerContainer

    telemetry._send_telemetry_request = lambda *a, **k: None
    publish = _SageMakerContainer._create_docker_host

    def create_docker_host(self, *a, **k):
        config = publish(self, *a, **k)
        if "ports" in config:
            config["ports"] = [f"127.0.0.1:{port}:8080"]
        if compose_hosts is not None:
            aliases = config.get("networks", {}).get("sagemaker-local", {}).get("aliases", [])
            compose_hosts.append((config["container_name"], aliases, config.get("extra_hosts")))
        return config

    _SageMakerContainer._create_docker_host = create_docker_host
    work = pathlib.Path(work).resolve()
    (work / "roots").mkdir(parents=True, exist_ok=True)
    session = LocalSession()
    session.config = {"local": {"local_code": True, "container_root": str(work / "roots"),
                                "serving_port": port}}
    return session


def jpeg_size(jpeg):
    """(width, height) from a JPEG's start-of-frame segment (the SDK's venv has no PIL)."""
    stream = io.BytesIO(jpeg)
    assert stream.read(2) == b"\xff\xd8", "not a JPEG"
    while True:
        marker, length = stream.read(2), int.from_bytes(stream.read(2), "big")
        assert len(marker) == 2 and marker[0] == 0xFF, "JPEG without a start-of-frame segment"
        if marker[1] in (0xC0, 0xC1, 0xC2):
            segment = stream.read(length - 2)
            return int.from_bytes(segment[3:5], "big"), int.from_bytes(segment[1:3], "big")
        stream.seek(length - 2, io.SEEK_CUR)


def predict_by_tiles(predictor, jpeg, untiled):
    """Tiled inference asked per request through SageMaker's CustomAttributes passthrough
    (issue 26), the way boto3's invoke_endpoint(CustomAttributes=...) sends it: tiles of half
    the image's shorter side answer with detections inside the image that differ from the
    untiled answer (each tile is resized to the model's test size), and a bad tile attribute is
    refused naming it."""
    width, height = jpeg_size(jpeg)
    tile = min(width, height) // 2
    tiled = predictor.predict(jpeg, initial_args={
        "CustomAttributes": f"score_threshold=0.0,tile_size={tile},tile_overlap=0.25"})
    assert isinstance(tiled, dict) and tiled.get("detections"), tiled
    assert [d["box"] for d in tiled["detections"]] != [d["box"] for d in untiled["detections"]], \
        "the tiled answer equals the untiled one: tile_size was not honoured"
    for d in tiled["detections"]:
        x1, y1, x2, y2 = d["box"]
        assert -0.5 <= x1 <= x2 <= width + 0.5 and -0.5 <= y1 <= y2 <= height + 0.5, (d, width, height)
    refused = predictor.predict(jpeg, initial_args={"CustomAttributes": f"tile_size={tile},tile_overlap=2"})
    assert refused.get("error") == "bad_custom_attributes" and "tile_overlap" in refused.get("detail", ""), refused
    check(f"Predictor.predict with initial_args CustomAttributes tile_size={tile}: {len(tiled['detections'])} "
          f"detections on {width}x{height} by tiles, not the untiled ones; tile_overlap=2 refused naming it")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--training-image", required=True)
    parser.add_argument("--serving-image", required=True)
    parser.add_argument("--train-dir", required=True, help="a COCO channel (annotations.json + images)")
    parser.add_argument("--hyperparameters", required=True, help="JSON object of hyperparameters")
    parser.add_argument("--work", required=True, help="folder for the SDK's container roots and output")
    parser.add_argument("--jpeg", required=True, help="image to send to the endpoint")
    parser.add_argument("--port", type=int, required=True, help="loopback port for the endpoint")
    parser.add_argument("--expect-iteration", type=int, required=True,
                        help="the last iteration the training must reach")
    args = parser.parse_args()

    compose_hosts = []  # (container_name, aliases, extra_hosts) of every service the SDK made
    session = local_session(args.work, args.port, compose_hosts)
    work = pathlib.Path(args.work).resolve()
    from sagemaker.deserializers import JSONDeserializer
    from sagemaker.estimator import Estimator
    from sagemaker.model import Model
    from sagemaker.predictor import Predictor
    from sagemaker.serializers import IdentitySerializer

    role = "arn:aws:iam::111111111111:role/local-mode-test"

    started = time.time()
    estimator = Estimator(image_uri=args.training_image, role=role, instance_count=1, instance_type="local",
                          output_path=(work / "output").as_uri(), sagemaker_session=session,
                          hyperparameters=json.loads(args.hyperparameters), base_job_name="mrcnn-local")
    estimator.fit({"train": pathlib.Path(args.train_dir).resolve().as_uri()}, wait=True, logs=True)
    model_data = estimator.model_data
    assert model_data.startswith("file://"), model_data
    tarball = pathlib.Path(model_data[len("file://"):])
    with tarfile.open(tarball) as tar:
        names = set(tar.getnames())
    for name in ("model.safetensors", "config.yaml", "classes.json"):
        assert name in names or f"./{name}" in names, f"{tarball} lacks {name}: {sorted(names)}"
    check(f"Estimator.fit in local mode: {time.time() - started:.0f} s, {tarball.name} holds model.safetensors, "
          "config.yaml, classes.json")
    output_tar = tarball.parent / "output.tar.gz"
    if output_tar.exists():
        with tarfile.open(output_tar) as tar:
            member = next((m for m in tar.getmembers() if m.name.endswith("data/metrics.jsonl")), None)
            assert member is not None, f"{output_tar} has no data/metrics.jsonl: {tar.getnames()}"
            lines = [json.loads(line) for line in tar.extractfile(member).read().decode().splitlines() if line]
        last = max(line.get("iteration", 0) for line in lines)
        assert last == args.expect_iteration, f"metrics.jsonl ends at iteration {last}, not {args.expect_iteration}"
        check(f"output.tar.gz: metrics.jsonl reaches iteration {last}")

    started = time.time()
    # Without predictor_cls, deploy() returns None (the SDK's behaviour for a bare image).
    model = Model(image_uri=args.serving_image, model_data=model_data, role=role, sagemaker_session=session,
                  predictor_cls=Predictor)
    predictor = model.deploy(initial_instance_count=1, instance_type="local",
                             serializer=IdentitySerializer("image/jpeg"), deserializer=JSONDeserializer())
    assert predictor is not None, "Model.deploy returned no predictor"
    try:
        check(f"Model.deploy in local mode: /ping answered 200 after {time.time() - started:.0f} s")
        answer = predictor.predict(pathlib.Path(args.jpeg).read_bytes(),
                                   custom_attributes="score_threshold=0.0")
        assert isinstance(answer, dict) and "detections" in answer, answer
        for d in answer["detections"]:
            assert len(d["box"]) == 4 and d["label"] and 0.0 <= d["score"] <= 1.0, d
        assert answer["detections"], "no detections at score_threshold=0.0"
        check(f"Predictor.predict (image/jpeg): {len(answer['detections'])} detections with box, label, score")
        predict_by_tiles(predictor, pathlib.Path(args.jpeg).read_bytes(), answer)
    finally:
        predictor.delete_endpoint()

    # Two hosts: the same job on instance_count=2.
    started = time.time()
    compose_hosts.clear()
    estimator = Estimator(image_uri=args.training_image, role=role, instance_count=2, instance_type="local",
                          output_path=(work / "output-2").as_uri(), sagemaker_session=session,
                          hyperparameters=json.loads(args.hyperparameters), base_job_name="mrcnn-local-2",
                          environment={"MRCNN_PEER_TIMEOUT": "120"})
    tee = Tee(sys.stdout)
    sys.stdout = tee
    try:
        estimator.fit({"train": pathlib.Path(args.train_dir).resolve().as_uri()}, wait=True, logs=True)
    finally:
        sys.stdout = tee.inner
    log = tee.text()
    names = [alias for _, aliases, _ in compose_hosts for alias in aliases]
    assert len(compose_hosts) == 2 and sorted(a.split("-")[1] for a in names) == ["1", "2"], compose_hosts
    assert all(extra is None for _, _, extra in compose_hosts), f"extra_hosts in the compose file: {compose_hosts}"
    for container, _, _ in compose_hosts:
        # docker-compose prefixes each line of a container's output with "NAME |" (maybe coloured).
        prefix = re.compile(r"^(\x1b\[[0-9;]*m)?" + re.escape(container) + r"\s*(\x1b\[[0-9;]*m)?\s*\|")
        assert any(prefix.match(line) for line in log.splitlines()), f"no output from {container}"
    ring = "processes: 2 (gradient all-reduce: tcp-ring"
    assert ring in log, f"no '{ring}' in the training output"
    tarball = pathlib.Path(estimator.model_data[len("file://"):])
    with tarfile.open(tarball) as tar:
        assert {"model.safetensors", "./model.safetensors"} & set(tar.getnames()), f"{tarball}: {tar.getnames()}"
    check(f"Estimator.fit with instance_count=2 in local mode: {time.time() - started:.0f} s; hosts "
          f"{' and '.join(sorted(names))} (network aliases only, no extra_hosts) found each other by DNS: "
          f"one job of 2 processes, gradient all-reduce tcp-ring; {tarball.name} holds model.safetensors")



def run_guarded(main, script):
    """Runs `main`; afterwards checks that the guard refused nothing. An error becomes one
    line for the caller's log, then the traceback."""
    try:
        main()
    except SystemExit:
        raise
    except BaseException as error:
        print(f"FAILED: {type(error).__name__}: {error}", file=sys.stderr, flush=True)
        if REFUSED:
            print(f"the guard refused connections to: {REFUSED}", file=sys.stderr)
        raise
    if REFUSED:
        raise SystemExit(f"{script}: the SDK tried to reach {REFUSED}")
    check("no connection left the machine (the guard refused none)")


if __name__ == "__main__":
    run_guarded(main, "sagemaker_local_mode.py")
