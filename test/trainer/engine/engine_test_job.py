"""What the engine's integration tests share: the built binaries they run and the tiny
synthetic shapes dataset they train on. Not a test module (pytest collects test_*.py)."""
import json
import os
import pathlib
import signal
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[3]
BUILD = pathlib.Path(os.environ.get("MRCNN_BUILD_DIR", REPO / "build"))
ENTRYPOINT = BUILD / "bin" / "entrypoint"
TRAINER = BUILD / "bin" / "trainer"


# The narrow ResNet-18-FPN on 64 px images that the engine's integration tests train for a
# few iterations on CPU (with the shapes config); each test appends its solver keys.
TINY_MODEL_OPTS = [
    "MODEL.FPN.OUT_CHANNELS 32", "MODEL.ROI_BOX_HEAD.FC_DIM 64", "MODEL.ROI_MASK_HEAD.CONV_DIM 32",
    "MODEL.RPN.POST_NMS_TOPK_TRAIN 50", "MODEL.ROI_HEADS.BATCH_SIZE_PER_IMAGE 32",
    "INPUT.MIN_SIZE_TRAIN [64] INPUT.MAX_SIZE_TRAIN 64 INPUT.MIN_SIZE_TEST 64 INPUT.MAX_SIZE_TEST 64",
    "DATALOADER.NUM_WORKERS 1",
]


def make_shapes(out: pathlib.Path, train: int, val: int, seed: int) -> pathlib.Path:
    """A 64 px shapes dataset in `out`; fails the test when the binaries are not built."""
    for exe in (ENTRYPOINT, TRAINER):
        if not exe.exists():
            pytest.fail(f"{exe} is not built (set MRCNN_BUILD_DIR)")
    subprocess.run([str(TRAINER), "make-shapes", "--output", str(out), "--train", str(train), "--val", str(val),
                    "--size", "64", "--seed", str(seed)], check=True, capture_output=True)
    return out


def finish(proc, timeout=300):
    """Waits for a training process; fails the test (after killing it) when it overruns.
    Returns (exit code, combined output)."""
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        pytest.fail("training did not finish:\n" + out[-3000:])
    return proc.returncode, out


def make_job(root: pathlib.Path, shapes: pathlib.Path, opts: str, channels=("train", "val"), **hyper) -> pathlib.Path:
    """A SageMaker-style job tree in `root` training the shapes config with `opts`; the
    channels are symlinks to `shapes`. Extra hyperparameters (resume=..., ...) go in as given."""
    (root / "input" / "config").mkdir(parents=True)
    (root / "input" / "data").mkdir(parents=True)
    for channel in channels:
        (root / "input" / "data" / channel).symlink_to(shapes)
    hp = {"config-file": "mask_rcnn_R_50_FPN_shapes_cpu.yaml", "opts": opts}
    hp.update(hyper)
    (root / "input" / "config" / "hyperparameters.json").write_text(json.dumps(hp))
    return root


def entrypoint_env(**extra) -> dict:
    """The test's environment without launcher variables (so the host's RANK, SM_*, ... cannot
    leak in), with the built trainer, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SM_", "MASTER_", "RANK", "WORLD_", "LOCAL_"))}
    env["MRCNN_TRAINER"] = str(TRAINER)
    env.update(extra)
    return env


def start_entrypoint(root: pathlib.Path, *flags: str, env=None) -> subprocess.Popen:
    """`entrypoint train` on the job tree `root` in a session of its own; its output goes to
    log_path(root), so a test can poll while it runs without a pipe filling up."""
    with open(log_path(root), "a") as log:
        return subprocess.Popen([str(ENTRYPOINT), "train", "--base-dir", str(root), *flags],
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=env if env is not None else entrypoint_env(), start_new_session=True)


def log_path(root: pathlib.Path) -> pathlib.Path:
    return root.parent / (root.name + ".log")


def children_of(pid: int) -> list:
    """Direct children of `pid` (empty when it is gone)."""
    try:
        return [int(p) for p in pathlib.Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except (FileNotFoundError, ProcessLookupError):
        return []


def rank_of(pid: int) -> int:
    """The RANK a trainer process was started with."""
    environ = pathlib.Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return int(next(e for e in environ if e.startswith(b"RANK=")).split(b"=", 1)[1])


def alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie."""
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat[stat.rfind(")") + 2] not in "ZX"


def kill_everything(proc: subprocess.Popen, pids=()) -> None:
    """SIGKILLs the entrypoint's session, its children's process groups and `pids`, so
    nothing a test started outlives it."""
    victims = set(pids) | set(children_of(proc.pid))
    for group in [proc.pid] + sorted(victims):
        try:
            os.killpg(group, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    for pid in victims:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=10)
