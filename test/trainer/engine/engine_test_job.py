"""What the engine's integration tests share: the built binaries they run and the tiny
synthetic shapes dataset they train on. Not a test module (pytest collects test_*.py)."""
import os
import pathlib
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
