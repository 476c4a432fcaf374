"""scripts/gpu-check/compare_predictions.py --same-masks (the GPU check's comparison of the masks
copied as paste-box pixels against the masks encoded on the GPU), on results written here."""
import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu-check" / "compare_predictions.py"


def detection(image_id, category, bbox, score, counts):
    return {"image_id": image_id, "category_id": category, "bbox": bbox, "score": score,
            "segmentation": {"size": [10, 12], "counts": counts}}


RESULTS = [detection(1, 2, [1.0, 2.0, 3.0, 4.0], 0.9, "a1"), detection(1, 3, [0.5, 2.0, 3.0, 4.0], 0.8, "b2"),
           detection(2, 2, [1.0, 1.0, 5.0, 5.0], 0.7, "c3")]


def compare(tmp_path, first, second, *extra):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(first))
    b.write_text(json.dumps(second))
    proc = subprocess.run([sys.executable, str(SCRIPT), "--same-masks", *extra, str(a), str(b)],
                          capture_output=True, text=True, timeout=60)
    return proc.returncode, proc.stdout


def test_equal_masks_in_another_order_pass(tmp_path):
    code, out = compare(tmp_path, RESULTS, list(reversed(RESULTS)))
    assert code == 0, out
    assert "3 detections, 3 paired (100.0%), 0 with another segmentation" in out


def test_one_different_string_fails_and_is_named(tmp_path):
    changed = [dict(d) for d in RESULTS]
    changed[1] = detection(1, 3, [0.5, 2.0, 3.0, 4.0], 0.8, "b3")
    code, out = compare(tmp_path, RESULTS, changed)
    assert code == 1
    assert "1 with another segmentation" in out and "image 1 category 3 [0.5, 2.0, 3.0, 4.0]" in out


def test_too_few_pairs_fail(tmp_path):
    moved = [dict(d) for d in RESULTS]
    moved[0] = detection(1, 2, [1.0, 2.0, 3.0, 4.5], 0.9, "a1")
    code, out = compare(tmp_path, RESULTS, moved)
    assert code == 1 and "2 paired (66.7%)" in out
    code, out = compare(tmp_path, RESULTS, moved, "--min-paired", "0.6")
    assert code == 0, out


def test_results_without_masks_compare_nothing_and_fail(tmp_path):
    bare = [{k: v for k, v in d.items() if k != "segmentation"} for d in RESULTS]
    code, out = compare(tmp_path, bare, bare)
    assert code == 1 and "nothing was compared" in out
