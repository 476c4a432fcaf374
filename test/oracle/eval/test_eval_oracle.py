"""`trainer evaluate` against pycocotools COCOeval on randomised ground truth / results.

Each case mixes crowd regions (uncompressed RLE), polygons, objects of every area range,
images without ground truth, categories without detections or without ground truth, more
detections per image than maxDets, tied scores, and results with and without boxes. All 12
numbers must agree within 1e-6 for bbox and segm.
"""
import contextlib
import io
import json
import os
import pathlib
import subprocess

import numpy as np
import pytest
from pycocotools import mask as mask_utils
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

BUILD = os.environ.get("MRCNN_BUILD_DIR", str(pathlib.Path(__file__).resolve().parents[3] / "build"))
TRAINER = os.path.join(BUILD, "bin", "trainer")


def random_polygon(rng, x, y, w, h):
    n = int(rng.integers(3, 9))
    ang = np.sort(rng.uniform(0, 2 * np.pi, n))
    rad = rng.uniform(0.3, 0.5, n)
    cx, cy = x + w / 2, y + h / 2
    pts = []
    for a, r in zip(ang, rad):
        pts += [float(cx + r * w * np.cos(a)), float(cy + r * h * np.sin(a))]
    return pts


def random_box(rng, W, H):
    # Spread sizes over small (<32^2), medium and large (>96^2) areas.
    side = float(rng.choice([rng.uniform(3, 30), rng.uniform(33, 95), rng.uniform(100, 300)]))
    w = min(side * rng.uniform(0.5, 1.5), W - 1)
    h = min(side * rng.uniform(0.5, 1.5), H - 1)
    x = rng.uniform(0, W - w)
    y = rng.uniform(0, H - h)
    return [float(x), float(y), float(w), float(h)]


def uncompressed_rle(mask):
    flat = mask.flatten(order="F")
    counts, cur, run = [], 0, 0
    for v in flat:
        if v != cur:
            counts.append(run)
            run, cur = 0, v
        run += 1
    counts.append(run)
    return counts


def make_case(seed):
    rng = np.random.default_rng(seed)
    n_img = int(rng.integers(3, 10))
    cat_ids = sorted(rng.choice(np.arange(1, 40), size=int(rng.integers(3, 6)), replace=False).tolist())
    cats = [{"id": int(c), "name": f"c{c}", "supercategory": "s"} for c in cat_ids]
    no_det_cat = cat_ids[0]  # never detected
    no_gt_cat = cat_ids[-1]  # never annotated (detections only)
    images, anns = [], []
    img_ids = sorted(rng.choice(np.arange(1, 10000), size=n_img, replace=False).tolist())
    rng.shuffle(img_ids)
    ann_id = 1
    for k, iid in enumerate(img_ids):
        W, H = int(rng.integers(80, 420)), int(rng.integers(80, 420))
        images.append({"id": int(iid), "file_name": f"{iid}.jpg", "width": W, "height": H})
        if k == 0:
            continue  # an image without ground truth
        for _ in range(int(rng.integers(0, 9))):
            cat = int(rng.choice([c for c in cat_ids if c != no_gt_cat]))
            box = random_box(rng, W, H)
            crowd = rng.uniform() < 0.12
            if crowd:
                m = np.zeros((H, W), dtype=np.uint8)
                x, y, w, h = [int(v) for v in box]
                m[y:y + h + 1, x:x + w + 1] = 1
                m[y + h // 3:y + h // 2, x:x + w // 2] = 0
                seg = {"counts": uncompressed_rle(m), "size": [H, W]}
                area = float(m.sum())
            else:
                polys = [random_polygon(rng, *box)]
                if rng.uniform() < 0.2:
                    polys.append(random_polygon(rng, *random_box(rng, W, H)))
                seg = polys
                rle = mask_utils.merge(mask_utils.frPyObjects(polys, H, W))
                area = float(mask_utils.area(rle))
                if rng.uniform() < 0.1:
                    area = float(box[2] * box[3])  # area from the box, as some datasets do
            anns.append({"id": ann_id, "image_id": int(iid), "category_id": cat, "bbox": box,
                         "area": area, "iscrowd": int(crowd), "segmentation": seg})
            ann_id += 1
    gt = {"images": images, "annotations": anns, "categories": cats}

    mode = seed % 3  # 0: bbox+segm results, 1: bbox only, 2: segm only
    results = []
    by_img = {}
    for a in anns:
        by_img.setdefault(a["image_id"], []).append(a)
    for img in images:
        iid, W, H = img["id"], img["width"], img["height"]
        n_det = int(rng.integers(0, 25))
        if rng.uniform() < 0.3:
            n_det = int(rng.integers(101, 160))  # more than maxDets
        for _ in range(n_det):
            cands = by_img.get(iid, [])
            src = None
            if cands and rng.uniform() < 0.6:
                g = cands[int(rng.integers(0, len(cands)))]
                src = g
                x, y, w, h = g["bbox"]
                j = rng.uniform(-0.15, 0.15, 4)
                box = [x + j[0] * w, y + j[1] * h, w * (1 + j[2]), h * (1 + j[3])]
                cat = g["category_id"] if rng.uniform() < 0.85 else int(rng.choice(cat_ids))
            else:
                box = random_box(rng, W, H)
                cat = int(rng.choice(cat_ids))
            if cat == no_det_cat:
                continue
            box = [float(max(0.0, box[0])), float(max(0.0, box[1])), float(max(1.0, box[2])),
                   float(max(1.0, box[3]))]
            score = float(np.round(rng.uniform(), 2))  # ties on purpose
            det = {"image_id": int(iid), "category_id": cat, "score": score}
            if mode in (0, 1):
                det["bbox"] = box
            if mode in (0, 2):
                if src is not None and isinstance(src["segmentation"], list):
                    # A near miss of the true mask, so mask IoUs span the thresholds.
                    jit = 0.08 * max(src["bbox"][2], src["bbox"][3])
                    polys = [[float(v + rng.normal(0, jit)) for v in p] for p in src["segmentation"]]
                else:
                    polys = [random_polygon(rng, *box)]
                rle = mask_utils.merge(mask_utils.frPyObjects(polys, H, W))
                rle["counts"] = rle["counts"].decode("ascii")
                det["segmentation"] = rle
            results.append(det)
    return gt, results


def pycocotools_stats(gt, results, iou_type):
    with contextlib.redirect_stdout(io.StringIO()):
        coco_gt = COCO()
        coco_gt.dataset = json.loads(json.dumps(gt))
        coco_gt.createIndex()
        coco_dt = coco_gt.loadRes(json.loads(json.dumps(results)))
        ev = COCOeval(coco_gt, coco_dt, iou_type)
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    return np.array(ev.stats), ev


def ours_stats(tmp_path, gt, results, iou_type):
    gt_path, res_path, out_path = tmp_path / "gt.json", tmp_path / "res.json", tmp_path / "stats.json"
    gt_path.write_text(json.dumps(gt))
    res_path.write_text(json.dumps(results))
    proc = subprocess.run([TRAINER, "evaluate", "--annotations", str(gt_path), "--results",
                           str(res_path), "--iou-type", iou_type, "--output", str(out_path),
                           "--per-category"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(out_path.read_text())


@pytest.mark.parametrize("iou_type", ["bbox", "segm"])
@pytest.mark.parametrize("seed", range(55))
def test_stats_match_pycocotools(tmp_path, seed, iou_type):
    gt, results = make_case(seed)
    if iou_type == "bbox" and seed % 3 == 2:
        pass  # segm-only results: boxes come from the masks, as in loadRes
    if iou_type == "segm" and seed % 3 == 1:
        pass  # box-only results: masks are the boxes' polygons, as in loadRes
    expected, ev = pycocotools_stats(gt, results, iou_type)
    got = ours_stats(tmp_path, gt, results, iou_type)
    np.testing.assert_allclose(np.array(got["stats_list"]), expected, rtol=0, atol=1e-6)
    # Per-category AP (all areas, maxDets=100) from pycocotools' precision array.
    prec = ev.eval["precision"][:, :, :, 0, -1]
    for k, cat in enumerate(got["per_category"]):
        p = prec[:, :, k]
        want = float(np.mean(p[p > -1])) if (p > -1).any() else -1.0
        assert cat["category_id"] == ev.params.catIds[k]
        assert abs(cat["AP"] - want) <= 1e-6, (cat, want)


def test_cases_cover_the_hard_parts():
    crowd = many = empty_img = no_det_cat = 0
    for seed in range(55):
        gt, results = make_case(seed)
        crowd += any(a["iscrowd"] for a in gt["annotations"])
        per_img = {}
        for r in results:
            per_img[r["image_id"]] = per_img.get(r["image_id"], 0) + 1
        many += any(v > 100 for v in per_img.values())
        annotated = {a["image_id"] for a in gt["annotations"]}
        empty_img += any(i["id"] not in annotated for i in gt["images"])
        detected = {r["category_id"] for r in results}
        no_det_cat += any(c["id"] not in detected for c in gt["categories"])
    assert crowd >= 20 and many >= 10 and empty_img == 55 and no_det_cat == 55
