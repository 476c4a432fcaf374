"""`trainer evaluate --iou-type keypoints` against pycocotools COCOeval (issue 52) on randomised
person-style ground truth and results: keypoints labelled visible, hidden and unlabelled,
annotations without labelled keypoints (num_keypoints 0: ignored), crowd regions, objects of
every area range, images without ground truth, more results per image than maxDets (20),
tied scores, results near and far from their objects, results with boxes (loadRes's bbox
branch: box areas) and with keypoints only (its keypoints branch: areas from the points), COCO's
17 sigmas and a custom keypoint count with its own sigmas. All 10 numbers and the per-category
AP must agree within 1e-9."""
import contextlib
import io
import json
import os
import pathlib
import subprocess

import numpy as np
import pytest
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

BUILD = os.environ.get("MRCNN_BUILD_DIR", str(pathlib.Path(__file__).resolve().parents[3] / "build"))
TRAINER = os.path.join(BUILD, "bin", "trainer")


def make_case(seed, num_keypoints):
    rng = np.random.default_rng(seed)
    cat_ids = sorted(rng.choice(np.arange(1, 20), size=int(rng.integers(1, 4)), replace=False).tolist())
    names = [f"point_{k}" for k in range(num_keypoints)]
    cats = [{"id": int(c), "name": f"c{c}", "keypoints": names, "skeleton": []} for c in cat_ids]
    images, anns, results = [], [], []
    with_boxes = seed % 3 != 0
    ann_id = 1
    for k, image_id in enumerate(sorted(rng.choice(np.arange(1, 5000), size=int(rng.integers(3, 8)),
                                                   replace=False).tolist())):
        W, H = int(rng.integers(100, 500)), int(rng.integers(100, 500))
        images.append({"id": int(image_id), "file_name": f"{image_id}.jpg", "width": W, "height": H})
        objects = [] if k == 0 else range(int(rng.integers(0, 8)))
        truths = []
        for _ in objects:
            side = float(rng.choice([rng.uniform(8, 30), rng.uniform(33, 95), rng.uniform(100, 250)]))
            w, h = min(side * rng.uniform(0.5, 1.5), W - 1), min(side * rng.uniform(0.5, 1.5), H - 1)
            x, y = rng.uniform(0, W - w), rng.uniform(0, H - h)
            points = np.stack([rng.uniform(x, x + w, num_keypoints), rng.uniform(y, y + h, num_keypoints),
                               rng.choice([0, 1, 2], num_keypoints, p=[0.3, 0.2, 0.5])], axis=1)
            if rng.uniform() < 0.15:
                points[:, 2] = 0  # no labelled keypoint: ignored ground truth
            points[points[:, 2] == 0, :2] = 0
            crowd = int(rng.uniform() < 0.08)
            cat = int(rng.choice(cat_ids))
            anns.append({"id": ann_id, "image_id": int(image_id), "category_id": cat, "bbox": [x, y, w, h],
                         "area": float(w * h * rng.uniform(0.5, 1.0)), "iscrowd": crowd,
                         "keypoints": [float(v) for v in points.reshape(-1)],
                         "num_keypoints": int((points[:, 2] > 0).sum())})
            ann_id += 1
            truths.append((cat, x, y, w, h, points))
        # Results: jittered truths (close and far), random boxes, more than maxDets on some.
        count = int(rng.integers(0, 30 if rng.uniform() < 0.3 else 10))
        for i in range(count):
            if truths and rng.uniform() < 0.7:
                cat, x, y, w, h, points = truths[int(rng.integers(len(truths)))]
                jitter = rng.choice([0.5, 2.0, 8.0, 30.0])
                xs = np.where(points[:, 2] > 0, points[:, 0], rng.uniform(x, x + w, num_keypoints))
                ys = np.where(points[:, 2] > 0, points[:, 1], rng.uniform(y, y + h, num_keypoints))
                xs, ys = xs + rng.normal(0, jitter, num_keypoints), ys + rng.normal(0, jitter, num_keypoints)
                if rng.uniform() < 0.2:
                    cat = int(rng.choice(cat_ids))
            else:
                cat = int(rng.choice(cat_ids))
                xs, ys = rng.uniform(0, W, num_keypoints), rng.uniform(0, H, num_keypoints)
            score = float(np.round(rng.uniform(0.05, 1.0), 2))  # rounded: ties happen
            result = {"image_id": int(image_id), "category_id": cat, "score": score,
                      "keypoints": [float(v) for v in np.stack([xs, ys, rng.uniform(0, 1, num_keypoints)],
                                                                axis=1).reshape(-1)]}
            if with_boxes:
                x0, y0 = float(xs.min()) - 2, float(ys.min()) - 2
                result["bbox"] = [x0, y0, float(xs.max()) + 2 - x0, float(ys.max()) + 2 - y0]
            results.append(result)
    gt = {"images": images, "annotations": anns, "categories": cats}
    return gt, results


def pycocotools_stats(gt, results, sigmas):
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        coco_gt = COCO()
        coco_gt.dataset = json.loads(json.dumps(gt))
        coco_gt.createIndex()
        coco_dt = coco_gt.loadRes(json.loads(json.dumps(results)))
        ev = COCOeval(coco_gt, coco_dt, "keypoints")
        if sigmas is not None:
            ev.params.kpt_oks_sigmas = np.array(sigmas)
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    ev.printed_summary = [line for line in printed.getvalue().splitlines() if line.startswith(" Average")]
    return np.array(ev.stats), ev


def ours_stats(tmp_path, gt, results, sigmas):
    gt_path, res_path, out_path = tmp_path / "gt.json", tmp_path / "res.json", tmp_path / "stats.json"
    gt_path.write_text(json.dumps(gt))
    res_path.write_text(json.dumps(results))
    command = [TRAINER, "evaluate", "--annotations", str(gt_path), "--results", str(res_path), "--iou-type",
               "keypoints", "--output", str(out_path), "--per-category"]
    if sigmas is not None:
        command += ["--oks-sigmas", ",".join(repr(s) for s in sigmas)]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(out_path.read_text()), proc.stdout


@pytest.mark.parametrize("keypoints", [17, 5], ids=["coco17", "custom5"])
@pytest.mark.parametrize("seed", range(30))
def test_keypoint_stats_match_pycocotools(tmp_path, seed, keypoints):
    gt, results = make_case(seed, keypoints)
    assert results, "every case has results (loadRes cannot take an empty list)"
    sigmas = None if keypoints == 17 else [0.03, 0.05, 0.07, 0.09, 0.11]
    expected, ev = pycocotools_stats(gt, results, sigmas)
    got, table = ours_stats(tmp_path, gt, results, sigmas)
    np.testing.assert_allclose(np.array(got["stats_list"]), expected, rtol=0, atol=1e-9)
    assert list(got["stats"]) == ["AP", "AP50", "AP75", "APm", "APl", "AR", "AR50", "AR75", "ARm", "ARl"]
    assert len(ev.printed_summary) == 10
    assert [line for line in table.splitlines() if line.startswith(" Average")] == ev.printed_summary
    prec = ev.eval["precision"][:, :, :, 0, -1]
    for k, cat in enumerate(got["per_category"]):
        p = prec[:, :, k]
        want = float(np.mean(p[p > -1])) if (p > -1).any() else -1.0
        assert cat["category_id"] == ev.params.catIds[k]
        assert abs(cat["AP"] - want) <= 1e-9, (cat, want)


def test_cases_cover_the_hard_parts():
    ignored = crowd = over_max = keypoint_only = 0
    for seed in range(30):
        gt, results = make_case(seed, 17)
        ignored += any(a["num_keypoints"] == 0 for a in gt["annotations"])
        crowd += any(a["iscrowd"] for a in gt["annotations"])
        per_image = {}
        for r in results:
            per_image[r["image_id"]] = per_image.get(r["image_id"], 0) + 1
        over_max += any(v > 20 for v in per_image.values())
        keypoint_only += bool(results) and "bbox" not in results[0]
    assert ignored >= 5 and crowd >= 3 and over_max >= 3 and keypoint_only >= 5


def test_a_keypoint_count_without_sigmas_is_refused(tmp_path):
    gt, results = make_case(3, 5)
    gt_path, res_path = tmp_path / "gt.json", tmp_path / "res.json"
    gt_path.write_text(json.dumps(gt))
    res_path.write_text(json.dumps(results))
    proc = subprocess.run([TRAINER, "evaluate", "--annotations", str(gt_path), "--results", str(res_path),
                           "--iou-type", "keypoints"], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert "5 keypoints for 17 OKS sigmas" in proc.stderr and "--oks-sigmas" in proc.stderr, proc.stderr
