"""INPUT.CROP in a real training job (issue 26): `entrypoint train` on a `trainer make-shapes
--canvas` dataset with 128x128 crops at native resolution runs its iterations with finite
losses, writes a model dir whose config carries the crop, and that model predicts by tiles. A
bad crop type stops the job before training, naming the key."""
import json
import math
import subprocess

import pytest

from engine_test_job import TINY_MODEL_OPTS, TRAINER, finish, log_path, make_job, start_entrypoint

ITERS = 6
CROP = ["INPUT.MIN_SIZE_TRAIN [128] INPUT.MAX_SIZE_TRAIN 1333 INPUT.MIN_SIZE_TEST 128",
        "INPUT.CROP.ENABLED True INPUT.CROP.TYPE absolute INPUT.CROP.SIZE [128, 128]"]
SOLVER = ["SOLVER.IMS_PER_BATCH 2", f"SOLVER.MAX_ITER {ITERS}", "SOLVER.WARMUP_ITERS 2", "SOLVER.BASE_LR 0.01",
          "SOLVER.CHECKPOINT_PERIOD 1000", "SOLVER.LOG_PERIOD 1", "SEED 4"]


@pytest.fixture(scope="module")
def canvases(tmp_path_factory):
    out = tmp_path_factory.mktemp("canvas")
    if not TRAINER.exists():
        pytest.fail(f"{TRAINER} is not built (set MRCNN_BUILD_DIR)")
    subprocess.run([str(TRAINER), "make-shapes", "--output", str(out), "--canvas", "512x384", "--objects", "40",
                    "--object-size", "16-40", "--train", "3", "--val", "1", "--seed", "6"],
                   check=True, capture_output=True)
    return out


def train(root, canvases, opts):
    make_job(root, canvases, " ".join(TINY_MODEL_OPTS + SOLVER + opts), channels=("train",))
    code, _ = finish(start_entrypoint(root), timeout=300)
    return code, log_path(root).read_text()


def test_training_on_crops_of_a_canvas_runs_and_its_model_predicts_by_tiles(tmp_path, canvases):
    code, out = train(tmp_path / "job", canvases, CROP)
    assert code == 0, out[-3000:]
    metrics = tmp_path / "job" / "output" / "data" / "metrics.jsonl"
    losses = [json.loads(line)["total_loss"] for line in metrics.read_text().splitlines() if "total_loss" in line]
    assert len(losses) == ITERS
    assert all(math.isfinite(v) for v in losses), losses
    model = tmp_path / "job" / "model"
    config = (model / "config.yaml").read_text()
    assert "CROP:" in config and "TYPE: \"absolute\"" in config, config
    image = canvases / "val" / "000001.png"
    done = subprocess.run([str(TRAINER), "predict", "--model-dir", str(model), "--images", str(image), "--output",
                           str(tmp_path / "dets.json"), "--tile-size", "128", "--tile-overlap", "0.25"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert isinstance(json.loads((tmp_path / "dets.json").read_text()), list)


def test_a_bad_crop_type_stops_the_job_naming_the_key(tmp_path, canvases):
    code, out = train(tmp_path / "bad", canvases, CROP + ["INPUT.CROP.TYPE tiles"])
    assert code != 0
    assert "INPUT.CROP.TYPE" in out and "absolute_range" in out, out[-3000:]
    assert "total_loss" not in out
