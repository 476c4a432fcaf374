"""A Mask R-CNN that detects shapes, for the tiled-inference test and bench: the demo's config
(`mask_rcnn_R_50_FPN_shapes_cpu.yaml`, ResNet-18-FPN at 128 px) trained through
`entrypoint train` on `trainer make-shapes --size 128`, with a shortened schedule. The model
dir is kept under the build dir, keyed by the schedule, so later runs reuse it. Not a test
module."""
import fcntl
import json
import os
import pathlib
import shutil
import subprocess

REPO = pathlib.Path(__file__).resolve().parents[3]
BUILD = pathlib.Path(os.environ.get("MRCNN_BUILD_DIR", REPO / "build")).resolve()
TRAINER = BUILD / "bin" / "trainer"
ENTRYPOINT = BUILD / "bin" / "entrypoint"


def trained_shapes_model(iterations: int, timeout: float = 1200) -> pathlib.Path:
    """The model dir of the shapes config trained for `iterations` (8 images each). Test modules
    on other pytest-xdist workers may ask at the same time: one trains, the others wait for it."""
    work = BUILD / "test_models" / f"shapes_128_it{iterations}"
    model = work / "opt_ml" / "model"
    work.parent.mkdir(parents=True, exist_ok=True)
    with open(work.parent / f"{work.name}.lock", "w") as lock:  # closing it releases the lock
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (model / "model.safetensors").exists():
            return model
        return train_shapes_model(work, model, iterations, timeout)


def train_shapes_model(work: pathlib.Path, model: pathlib.Path, iterations: int, timeout: float) -> pathlib.Path:
    """Trains into `work` (emptied first) under the caller's lock; returns `model`."""
    for exe in (TRAINER, ENTRYPOINT):
        if not exe.exists():
            raise RuntimeError(f"{exe} is not built (set MRCNN_BUILD_DIR)")
    shutil.rmtree(work, ignore_errors=True)
    shapes = work / "shapes"
    subprocess.run([str(TRAINER), "make-shapes", "--output", str(shapes), "--train", "400", "--val", "10",
                    "--size", "128", "--seed", "1"], check=True, capture_output=True)
    base = work / "opt_ml"
    (base / "input" / "config").mkdir(parents=True)
    (base / "input" / "data").mkdir(parents=True)
    (base / "input" / "data" / "train").symlink_to(shapes)
    (base / "input" / "config" / "hyperparameters.json").write_text(json.dumps({
        "config-file": "mask_rcnn_R_50_FPN_shapes_cpu.yaml",
        "opts": f"SOLVER.MAX_ITER {iterations} SOLVER.CHECKPOINT_PERIOD 100000"}))
    done = subprocess.run([str(ENTRYPOINT), "train", "--base-dir", str(base)], env=job_env(), capture_output=True,
                          text=True, timeout=timeout)
    if done.returncode != 0 or not (model / "model.safetensors").exists():
        raise RuntimeError("training the shapes model failed:\n" + (done.stdout + done.stderr)[-3000:])
    return model


def job_env() -> dict:
    """This process's environment without a launcher's or SageMaker's variables, plus the
    build's trainer and the repository's configs, for `entrypoint train`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SM_", "MASTER_", "RANK", "WORLD_", "LOCAL_"))}
    env.update(MRCNN_TRAINER=str(TRAINER), MRCNN_CONFIG_DIR=str(REPO / "configs"))
    return env


def eval_only(root: pathlib.Path, data: pathlib.Path, model: pathlib.Path, opts: str):
    """An eval-only job of the shapes config under `root` (an /opt/ml tree whose train and val
    channels are `data` and whose weights channel is `model`), with `opts` appended.
    Returns (exit code, output, the metrics.jsonl records)."""
    (root / "input" / "config").mkdir(parents=True)
    (root / "input" / "data").mkdir(parents=True)
    for channel in ("train", "val"):
        (root / "input" / "data" / channel).symlink_to(data)
    (root / "input" / "data" / "weights").symlink_to(model)
    (root / "input" / "config" / "hyperparameters.json").write_text(json.dumps({
        "config-file": "mask_rcnn_R_50_FPN_shapes_cpu.yaml", "eval-only": "true", "opts": opts}))
    done = subprocess.run([str(ENTRYPOINT), "train", "--base-dir", str(root)], env=job_env(),
                          capture_output=True, text=True, timeout=900)
    metrics = root / "output" / "data" / "metrics.jsonl"
    records = [json.loads(line) for line in metrics.read_text().splitlines()] if metrics.exists() else []
    return done.returncode, done.stdout + done.stderr, records
