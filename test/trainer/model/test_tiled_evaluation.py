"""TEST.TILE.SIZE / TEST.TILE.OVERLAP: the training engine's COCO evaluation by tiles (issue 26).
An eval-only job (`entrypoint train`, hyperparameter eval-only) with the shapes model of
shapes_model.py on a validation channel holding one 1024x768 canvas of 60 small shapes: by
tiles at the model's scale its box AP50 is high, on the whole image shrunk to 128 px near 0.
A tile overlap out of range stops the job before anything runs, naming the key."""
import json
import pathlib
import shutil
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import shapes_canvas  # noqa: E402
import shapes_model  # noqa: E402



def dataset(root: pathlib.Path) -> pathlib.Path:
    """A channel laid out like `trainer make-shapes` output, its val split a large canvas."""
    rng = np.random.default_rng(5)
    img, anns = shapes_canvas.draw(1024, 768, shapes_canvas.grid_shapes(1024, 768, 60, (16, 48), rng), rng)
    for split in ("train", "val"):
        (root / split).mkdir(parents=True)
        shapes_canvas.write(root / split / "canvas.png", img)
    (root / "annotations").mkdir()
    shapes_canvas.coco_json(root / "annotations" / "instances_val.json", "canvas.png", 1024, 768, anns)
    shutil.copy(root / "annotations" / "instances_val.json", root / "annotations" / "instances_train.json")
    return root


def eval_only(tmp: pathlib.Path, data: pathlib.Path, model: pathlib.Path, opts: str):
    return shapes_model.eval_only(tmp / "job", data, model, opts + " TEST.DETECTIONS_PER_IMAGE 300")


def test_evaluation_by_tiles_finds_the_small_shapes(tmp_path):
    model = shapes_model.trained_shapes_model(iterations=150)
    data = dataset(tmp_path / "data")
    results = {}
    for name, opts in (("untiled", ""), ("tiled", "TEST.TILE.SIZE 128 TEST.TILE.OVERLAP 0.4")):
        code, out, records = eval_only(tmp_path / name, data, model, opts)
        assert code == 0, out[-3000:]
        results[name] = {k: v for r in records for k, v in r.items() if k.startswith(("bbox/", "segm/"))}
        assert results[name], (name, records)
    print(json.dumps(results))
    assert results["untiled"]["bbox/AP50"] <= 0.1
    assert results["tiled"]["bbox/AP50"] >= 0.5
    assert results["tiled"]["segm/AP50"] >= 0.5


def test_a_tile_overlap_out_of_range_stops_the_job_naming_the_key(tmp_path):
    model = shapes_model.trained_shapes_model(iterations=150)
    data = dataset(tmp_path / "data")
    code, out, _ = eval_only(tmp_path / "bad", data, model, "TEST.TILE.SIZE 128 TEST.TILE.OVERLAP 0.95")
    assert code != 0
    assert "TEST.TILE.OVERLAP" in out, out[-3000:]
