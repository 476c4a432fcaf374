"""Zoo weights fetched as Detectron2 names them (issue 60): `entrypoint train` on the zoo's
R50-FPN config with its MODEL.WEIGHTS untouched (detectron2://ImageNetPretrained/MSRA/R-50.pkl)
downloads the backbone from a loopback HTTPS mirror with a CA of the test's own (SSL_CERT_FILE,
MRCNN_ZOO_MIRROR), trains on it, and a restart downloads nothing; the same file comes from a
loopback S3 (moto_server, SigV4 checked); a download cut half way resumes with Range; a 404, a
wrong md5, a body cut short every time and a server that never answers each end the job within
the bounds, non-zero, with output/failure naming the URL and the cause."""
import json
import os
import pathlib
import pickle
import re
import shutil
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "trainer" / "engine"))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "trainer" / "model"))
from caffe2_names import caffe2_name_of_detectron2  # noqa: E402
from engine_test_job import TRAINER, entrypoint_env, log_path, make_shapes, start_entrypoint  # noqa: E402
from zoo_server import ConnectProxy, SilentServer, ZooFile, ZooServer, make_ca_and_server_cert  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[2]
GOLDEN = REPO / "test" / "data" / "detectron2" / "mask_rcnn_R_50_FPN"
ZOO_CONFIG = "COCO-InstanceSegmentation/mask_rcnn_R_50_FPN_3x.yaml"
R50_PATH = "/detectron2/ImageNetPretrained/MSRA/R-50.pkl"  # the config's MODEL.WEIGHTS, mirrored
CACHED_R50 = pathlib.Path("weights_cache/dl.fbaipublicfiles.com/detectron2/ImageNetPretrained/MSRA/R-50.pkl")
# Failing downloads in seconds, not minutes: the defaults' bound (< 2 min) is a unit test's.
FAST_FAILURE = {"MRCNN_DOWNLOAD_CONNECT_TIMEOUT_S": "2", "MRCNN_DOWNLOAD_IDLE_TIMEOUT_S": "2",
                "MRCNN_DOWNLOAD_ATTEMPTS": "3", "MRCNN_DOWNLOAD_BACKOFF_MS": "100"}
SMALL_RUN = ["MODEL.ROI_HEADS.NUM_CLASSES 3", "MODEL.DEVICE cpu", "SOLVER.IMS_PER_BATCH 2", "SOLVER.BASE_LR 0.00005",
             "SOLVER.WARMUP_ITERS 1", "SOLVER.CHECKPOINT_PERIOD 100", "SOLVER.LOG_PERIOD 1",
             "MODEL.RPN.POST_NMS_TOPK_TRAIN 100", "MODEL.RPN.PRE_NMS_TOPK_TRAIN 400",
             "MODEL.ROI_HEADS.BATCH_SIZE_PER_IMAGE 32",
             "INPUT.MIN_SIZE_TRAIN [64] INPUT.MAX_SIZE_TRAIN 64 INPUT.MIN_SIZE_TEST 64 INPUT.MAX_SIZE_TEST 64",
             "DATALOADER.NUM_WORKERS 1", "TENSORBOARD.EVAL_IMAGES 0", "TEST.EVAL_PERIOD 0", "SEED 5"]


def narrow_opts() -> list:
    """The golden variant's narrow widths as opts."""
    overrides = json.loads((GOLDEN / "info.json").read_text())["overrides"]
    return [f"{k} {v}" for k, v in overrides.items()
            if k.startswith(("MODEL.RESNETS.", "MODEL.FPN.", "MODEL.ROI_BOX_HEAD.", "MODEL.ROI_MASK_HEAD."))]


@pytest.fixture(scope="module")
def backbone_pkl(tmp_path_factory) -> bytes:
    """An ImageNet R-50 in Caffe2's names at the golden variant's narrow widths: its body's
    tensors (Detectron2's own initialisation; plain normal values would make the 50 layers'
    activations overflow at the first step), and the classifier Caffe2's files carry."""
    state = torch.load(GOLDEN / "model_final.pth", map_location="cpu", weights_only=True)["model"]
    rng = np.random.default_rng(7)
    blobs = {c2: v.numpy().astype(np.float32)
             for k, v in state.items() if (c2 := caffe2_name_of_detectron2(k)) is not None}
    assert "res5_2_branch2c_bn_b" in blobs and "conv1_w" in blobs
    blobs["fc1000_w"] = rng.standard_normal((1000, 8)).astype(np.float32)
    return pickle.dumps(blobs, protocol=2)


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    return make_ca_and_server_cert(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def zoo(tls):
    server = ZooServer(tls[1], tls[2])
    yield server
    server.close()


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    return make_shapes(tmp_path_factory.mktemp("shapes"), train=6, val=2, seed=3)


def download_env(tls, mirror: str, **extra) -> dict:
    """The job's environment: the test's CA trusted, the mirror, no proxy of the host's."""
    env = {k: v for k, v in entrypoint_env().items() if not k.lower().endswith("_proxy")}
    env.update(SSL_CERT_FILE=str(tls[0]), MRCNN_ZOO_MIRROR=mirror, **extra)
    return env


def job_tree(root: pathlib.Path, shapes: pathlib.Path, opts: list) -> pathlib.Path:
    (root / "input" / "config").mkdir(parents=True)
    (root / "input" / "data").mkdir(parents=True)
    for channel in ("train", "val"):
        (root / "input" / "data" / channel).symlink_to(shapes)
    hyperparameters = {"config-file": ZOO_CONFIG, "opts": " ".join(opts)}
    (root / "input" / "config" / "hyperparameters.json").write_text(json.dumps(hyperparameters))
    return root


def run_job(root: pathlib.Path, env: dict, timeout=600):
    """(exit code, log, seconds) of `entrypoint train` on the tree."""
    started = time.monotonic()
    proc = start_entrypoint(root, "--master-port", "29583", env=env)
    try:
        code = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("the job did not end:\n" + log_path(root).read_text()[-3000:])
    return code, log_path(root).read_text(), time.monotonic() - started


def test_a_zoo_config_downloads_its_backbone_trains_and_a_restart_downloads_nothing(
        zoo, tls, shapes, backbone_pkl, tmp_path):
    zoo.files[R50_PATH] = ZooFile(backbone_pkl)
    root = job_tree(tmp_path / "job", shapes, ["SOLVER.MAX_ITER 2", *narrow_opts(), *SMALL_RUN])
    env = download_env(tls, f"https://127.0.0.1:{zoo.port}/")
    code, out, _ = run_job(root, env)
    assert code == 0, out[-4000:]
    assert zoo.requests_for(R50_PATH) == [(R50_PATH, None)]
    cached = root / "checkpoints" / CACHED_R50
    assert cached.read_bytes() == backbone_pkl
    assert f"[weights] downloaded https://127.0.0.1:{zoo.port}{R50_PATH}" in out
    assert re.search(r"\[weights\] R-50\.pkl: .* \[(\d+)/\1 bytes\]", out), out[-3000:]
    # The backbone was loaded from the cache file: every body tensor of the R-50.
    assert "[weights] loaded" in out and str(cached) in out, out[-3000:]
    assert "[train] iter: 2/2" in out

    # A spot restart: the checkpoint dir (and so the cache) is back; nothing is fetched.
    hyperparameters = json.loads((root / "input/config/hyperparameters.json").read_text())
    hyperparameters["opts"] = hyperparameters["opts"].replace("SOLVER.MAX_ITER 2", "SOLVER.MAX_ITER 3")
    (root / "input/config/hyperparameters.json").write_text(json.dumps(hyperparameters))
    log_path(root).unlink()
    code, out, _ = run_job(root, env)
    assert code == 0, out[-4000:]
    assert len(zoo.requests_for(R50_PATH)) == 1, zoo.requests
    assert "(cached; nothing downloaded)" in out, out[-3000:]
    assert "[train] iter: 3/3" in out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def moto(tmp_path):
    """moto_server on a free loopback port, checking SigV4 from its 6th request on (the 5 the
    fixture makes: an IAM user with a policy and a key, a bucket); yields (endpoint, key)."""
    import boto3
    port = free_port()
    server = shutil.which("moto_server", path=str(pathlib.Path(sys.executable).parent))
    assert server, "moto_server is not installed (scripts/requirements.txt: moto[server])"
    env = dict(os.environ, INITIAL_NO_AUTH_ACTION_COUNT="5")
    proc = subprocess.Popen([server, "-H", "127.0.0.1", "-p", str(port)], env=env,
                            stdout=open(tmp_path / "moto.log", "w"), stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    pytest.fail("moto_server did not start: " + (tmp_path / "moto.log").read_text()[-2000:])
                time.sleep(0.1)
        endpoint = f"http://127.0.0.1:{port}"
        kw = dict(endpoint_url=endpoint, region_name="eu-west-1", aws_access_key_id="setup",
                  aws_secret_access_key="setup")
        iam = boto3.client("iam", **kw)
        iam.create_user(UserName="job")
        iam.put_user_policy(UserName="job", PolicyName="read", PolicyDocument=json.dumps(
            {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}))
        key = iam.create_access_key(UserName="job")["AccessKey"]
        boto3.client("s3", **kw).create_bucket(Bucket="zoo-bucket",
                                               CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
        s3 = boto3.client("s3", endpoint_url=endpoint, region_name="eu-west-1",
                          aws_access_key_id=key["AccessKeyId"], aws_secret_access_key=key["SecretAccessKey"])
        yield endpoint, key, s3
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def fetch_weights(weights: str, cache: pathlib.Path, env: dict, timeout=120):
    return subprocess.run([str(TRAINER), "fetch-weights", weights, "--cache", str(cache)], env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_the_backbone_comes_from_s3_signed(moto, tls, backbone_pkl, tmp_path):
    endpoint, key, s3 = moto
    s3.put_object(Bucket="zoo-bucket", Key="zoo" + R50_PATH, Body=backbone_pkl)
    env = download_env(tls, "s3://zoo-bucket/zoo/", AWS_ENDPOINT_URL_S3=endpoint, AWS_REGION="eu-west-1",
                       AWS_ACCESS_KEY_ID=key["AccessKeyId"], AWS_SECRET_ACCESS_KEY=key["SecretAccessKey"])
    env.pop("AWS_SESSION_TOKEN", None)
    run = fetch_weights("detectron2://ImageNetPretrained/MSRA/R-50.pkl", tmp_path / "cache", env)
    assert run.returncode == 0, run.stderr
    cached = pathlib.Path(run.stdout.strip())
    assert cached == tmp_path / "cache" / CACHED_R50.relative_to("weights_cache")
    assert cached.read_bytes() == backbone_pkl
    # moto checks the signature: a wrong secret is refused, and the message says so.
    env["AWS_SECRET_ACCESS_KEY"] = "not-the-secret"
    run = fetch_weights("detectron2://ImageNetPretrained/MSRA/R-50.pkl", tmp_path / "other", env)
    assert run.returncode != 0
    assert "403" in run.stderr and "SignatureDoesNotMatch" in run.stderr, run.stderr
    assert f"s3://zoo-bucket/zoo{R50_PATH}" in run.stderr


@pytest.mark.parametrize("ignore_range", [False, True], ids=["range", "range-ignored"])
def test_a_download_cut_half_way_resumes(zoo, tls, tmp_path, ignore_range):
    data = os.urandom(3_000_000)
    zoo.files[R50_PATH] = ZooFile(data, cut_first=True, ignore_range=ignore_range)
    env = download_env(tls, f"https://127.0.0.1:{zoo.port}/", **FAST_FAILURE)
    run = fetch_weights("detectron2://ImageNetPretrained/MSRA/R-50.pkl", tmp_path / "cache", env)
    assert run.returncode == 0, run.stderr
    assert pathlib.Path(run.stdout.strip()).read_bytes() == data
    assert zoo.requests_for(R50_PATH) == [(R50_PATH, None), (R50_PATH, "bytes=1500000-")]
    expected = "the server ignored Range: starting again" if ignore_range else "resuming after 1500000 bytes"
    assert expected in run.stderr, run.stderr
    assert not list((tmp_path / "cache").rglob("*.partial"))


def test_https_goes_through_the_proxy_as_a_tunnel_unless_no_proxy_exempts_it(zoo, tls, tmp_path):
    data = os.urandom(200_000)
    zoo.files[R50_PATH] = ZooFile(data)
    proxy = ConnectProxy()
    try:
        env = download_env(tls, f"https://127.0.0.1:{zoo.port}/", HTTPS_PROXY=f"http://127.0.0.1:{proxy.port}")
        run = fetch_weights("detectron2://ImageNetPretrained/MSRA/R-50.pkl", tmp_path / "a", env)
        assert run.returncode == 0, run.stderr
        assert pathlib.Path(run.stdout.strip()).read_bytes() == data
        assert proxy.targets == [f"127.0.0.1:{zoo.port}"]
        env["no_proxy"] = "localhost,127.0.0.0/8"
        run = fetch_weights("detectron2://ImageNetPretrained/MSRA/R-50.pkl", tmp_path / "b", env)
        assert run.returncode == 0, run.stderr
        assert proxy.targets == [f"127.0.0.1:{zoo.port}"]  # no second tunnel
        assert len(zoo.requests_for(R50_PATH)) == 2
    finally:
        proxy.close()


def failing_job(root, shapes, env, extra_opts=()):
    job_tree(root, shapes, ["SOLVER.MAX_ITER 2", *extra_opts, *narrow_opts(), *SMALL_RUN])
    code, out, seconds = run_job(root, env, timeout=180)
    failure = root / "output" / "failure"
    assert failure.is_file(), out[-3000:]
    return code, failure.read_text(), seconds, out


FAILURES = {
    # name: (what the server does, the URL path, opts, words the failure must hold)
    "404": (lambda zoo: None, R50_PATH, [], ["HTTP 404"]),
    "wrong-md5": (lambda zoo: zoo.files.__setitem__(
        "/detectron2/COCO-InstanceSegmentation/mask_rcnn_R_50_FPN_3x/137849600/model_final_f10217.pkl",
        ZooFile(b"not the zoo's file")),
        "/detectron2/COCO-InstanceSegmentation/mask_rcnn_R_50_FPN_3x/137849600/model_final_f10217.pkl",
        ["MODEL.WEIGHTS detectron2://COCO-InstanceSegmentation/mask_rcnn_R_50_FPN_3x/137849600/"
         "model_final_f10217.pkl"], ["md5", "f10217"]),
    "truncated": (lambda zoo: zoo.files.__setitem__(R50_PATH, ZooFile(os.urandom(400_000), cut_every_time=True)),
                  R50_PATH, [], ["200000 of 400000 bytes received: truncated", "3 tries"]),
}


@pytest.mark.parametrize("case", sorted(FAILURES))
def test_a_failing_download_fails_the_job_naming_url_cause_and_fix(zoo, tls, shapes, tmp_path, case):
    serve, path, opts, words = FAILURES[case]
    serve(zoo)
    env = download_env(tls, f"https://127.0.0.1:{zoo.port}/", **FAST_FAILURE)
    code, failure, seconds, out = failing_job(tmp_path / "job", shapes, env, opts)
    assert code != 0, out[-3000:]
    assert seconds < 60, f"{seconds:.1f} s"
    assert f"https://127.0.0.1:{zoo.port}{path}" in failure, failure
    for word in words + ["MODEL.WEIGHTS", "weights channel", "MRCNN_ZOO_MIRROR"]:
        assert word in failure, (word, failure)
    assert not list((tmp_path / "job" / "checkpoints" / "weights_cache").rglob("*.pkl")), "a bad file was cached"


def test_a_server_that_never_answers_fails_the_job_in_bounded_time(tls, shapes, tmp_path):
    silent = SilentServer()
    try:
        env = download_env(tls, f"https://127.0.0.1:{silent.port}/", **FAST_FAILURE)
        code, failure, seconds, out = failing_job(tmp_path / "job", shapes, env)
    finally:
        silent.close()
    assert code != 0, out[-3000:]
    # 3 tries of a 2 s handshake bound, 0.3 s of backoff, plus the trainer's start.
    assert 6 <= seconds < 60, f"{seconds:.1f} s"
    assert f"https://127.0.0.1:{silent.port}{R50_PATH}" in failure, failure
    assert "does not answer" in failure and "3 tries" in failure, failure
