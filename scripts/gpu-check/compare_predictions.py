#!/usr/bin/env python3
"""`trainer predict --device cuda` against `--device cpu` on the same images and model
(COCO results JSON from each). The GPU answer must hold the CPU's detections: every CPU
detection scoring >= --min-score has a GPU detection of the same image and category with
box IoU >= --iou and a score within --score-tol, and the counts above --min-score differ by
at most --count-tol per image (a detection near the threshold may cross it). Kernels run in
other orders on the GPU (atomics in ROIAlign's backward, cuDNN convolutions), so equality
is not expected; these tolerances are what a user would call "the same detections".

  python3 scripts/gpu-check/compare_predictions.py CPU.json GPU.json

--same-masks A.json B.json: two runs on the same device that differ only in where the masks
were encoded (`--mask-rle host`: the masks' paste boxes copied to the host and encoded there;
`--mask-rle device`: encoded on the GPU). Each detection of A is paired with B's detection of
the same image, category, box and score; at least --min-paired of A's detections must pair
(kernels may break near-ties differently between two runs), and every pair's segmentation
must be the same string.
"""
import argparse
import json
import sys


def iou(a, b):
    ax2, ay2, bx2, by2 = a[0] + a[2], a[1] + a[3], b[0] + b[2], b[1] + b[3]
    w = max(0.0, min(ax2, bx2) - max(a[0], b[0]))
    h = max(0.0, min(ay2, by2) - max(a[1], b[1]))
    inter = w * h
    union = a[2] * a[3] + b[2] * b[3] - inter
    return inter / union if union > 0 else 0.0


def same_masks(first, second, min_paired):
    """0 when the paired detections' segmentations are equal strings (see --same-masks)."""
    def key(d):
        return (d["image_id"], d["category_id"], tuple(d["bbox"]), d["score"])

    by_key = {}
    for d in second:
        by_key.setdefault(key(d), []).append(d)
    paired, different = 0, []
    for d in first:
        candidates = by_key.get(key(d), [])
        if not candidates:
            continue
        other = candidates.pop(0)
        paired += 1
        if d.get("segmentation") != other.get("segmentation"):
            different.append(f"image {d['image_id']} category {d['category_id']} {d['bbox']}")
    share = paired / len(first) if first else 0.0
    print(f"compare-predictions --same-masks: {len(first)} detections, {paired} paired "
          f"({100 * share:.1f}%), {len(different)} with another segmentation")
    for line in different[:20]:
        print(f"compare-predictions: different mask: {line}")
    if not first or "segmentation" not in first[0]:
        print("compare-predictions: no detection with a segmentation: nothing was compared")
        return 1
    return 0 if share >= min_paired and not different else 1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("cpu")
    p.add_argument("gpu")
    p.add_argument("--min-score", type=float, default=0.3)
    p.add_argument("--iou", type=float, default=0.9)
    p.add_argument("--score-tol", type=float, default=0.05)
    p.add_argument("--count-tol", type=int, default=1)
    p.add_argument("--same-masks", action="store_true")
    p.add_argument("--min-paired", type=float, default=0.9)
    a = p.parse_args()
    if a.same_masks:
        return same_masks(json.load(open(a.cpu)), json.load(open(a.gpu)), a.min_paired)
    by_image = {}
    for side in ("cpu", "gpu"):
        for d in json.load(open(getattr(a, side))):
            by_image.setdefault(d["image_id"], {"cpu": [], "gpu": []})[side].append(d)
    checked, problems, ious, score_diffs = 0, [], [], []
    for image_id, sides in sorted(by_image.items()):
        cpu = [d for d in sides["cpu"] if d["score"] >= a.min_score]
        gpu_all = sides["gpu"]
        gpu = [d for d in gpu_all if d["score"] >= a.min_score]
        if abs(len(cpu) - len(gpu)) > a.count_tol:
            problems.append(f"image {image_id}: {len(cpu)} CPU vs {len(gpu)} GPU detections >= {a.min_score}")
        for d in cpu:
            checked += 1
            same = [g for g in gpu_all if g["category_id"] == d["category_id"]]
            best = max(same, key=lambda g: iou(d["bbox"], g["bbox"]), default=None)
            if best is None or iou(d["bbox"], best["bbox"]) < a.iou or abs(best["score"] - d["score"]) > a.score_tol:
                problems.append(f"image {image_id}: CPU detection {d['category_id']} {d['bbox']} "
                                f"score {d['score']:.3f} has no GPU match"
                                + (f" (best IoU {iou(d['bbox'], best['bbox']):.3f}, score {best['score']:.3f})" if best else ""))
            else:
                ious.append(iou(d["bbox"], best["bbox"]))
                score_diffs.append(abs(best["score"] - d["score"]))
    print(f"compare-predictions: {len(by_image)} images, {checked} CPU detections >= {a.min_score}; "
          f"matched {len(ious)}; min IoU {min(ious, default=float('nan')):.4f}; "
          f"max |score diff| {max(score_diffs, default=float('nan')):.4f}")
    for line in problems[:20]:
        print(f"compare-predictions: {line}")
    if checked == 0:
        print("compare-predictions: no CPU detection above the threshold: nothing was compared")
        return 1
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
