#!/usr/bin/env python3
"""Compare our detections with Detectron2's on the same checkpoint and images.

Both sides are JSON in the format of the golden data's expected.json
(scripts/detectron2_golden.py):
    {image file name: {"boxes": [[x1, y1, x2, y2], ...], "scores": [...], "classes": [...],
                       "masks": [COCO RLE, ...] (mask models only),
                       "keypoints": [[[x, y, score], ...], ...] (keypoint models only),
                       "height": H, "width": W}}
classes are 0-based Detectron2 ids; keypoints are in Detectron2's continuous coordinates
(pred_keypoints: a COCO results file's keypoints + 0.5).

Matching: Detectron2's detections are taken in descending score order; each is paired with the
not-yet-paired detection of ours of the same class that overlaps it most (box IoU > 0), so
pairs are one to one. A pair is *matched* when every box coordinate differs by at most
--box-tolerance pixels (0.5) and the scores by at most --score-tolerance (2e-3). The table
gives, per image and in total, the fraction of Detectron2's detections that are matched, the
largest box and score differences over matched pairs (and how many pairs fell outside the
tolerances, with their worst differences), the mean mask IoU over matched pairs, and for
keypoint models the fraction of the matched pairs' keypoints within --keypoint-tolerance
pixels (1) in x and y.

compare_predictions() is pure numpy + pycocotools so pytest can import it where Detectron2 is
absent; only the CLI's --weights / --rerun path runs Detectron2 (through
detectron2_golden.py's helpers).

    # against golden data (no Detectron2 needed)
    python scripts/detectron2_compare.py --golden test/data/detectron2/mask_rcnn_R_50_FPN --ours ours.json
    # against Detectron2 run now on a checkpoint
    python scripts/detectron2_compare.py --detectron2 /work/d2ref/src \\
        --config-file COCO-InstanceSegmentation/mask_rcnn_R_50_FPN_3x.yaml \\
        --weights model_final.pth --images DIR --ours ours.json
"""
import argparse
import json
import os
import sys

import numpy as np

BOX_TOLERANCE_PX = 0.5
SCORE_TOLERANCE = 2e-3
KEYPOINT_TOLERANCE_PX = 1.0


def box_iou(boxes_a, boxes_b):
    """IoU of every box in boxes_a (N,4) with every box in boxes_b (M,4), x1y1x2y2."""
    boxes_a = np.asarray(boxes_a, dtype=np.float64).reshape(-1, 4)
    boxes_b = np.asarray(boxes_b, dtype=np.float64).reshape(-1, 4)
    area_a = np.clip(boxes_a[:, 2] - boxes_a[:, 0], 0, None) * np.clip(boxes_a[:, 3] - boxes_a[:, 1], 0, None)
    area_b = np.clip(boxes_b[:, 2] - boxes_b[:, 0], 0, None) * np.clip(boxes_b[:, 3] - boxes_b[:, 1], 0, None)
    top_left = np.maximum(boxes_a[:, None, :2], boxes_b[None, :, :2])
    bottom_right = np.minimum(boxes_a[:, None, 2:], boxes_b[None, :, 2:])
    size = np.clip(bottom_right - top_left, 0, None)
    intersection = size[..., 0] * size[..., 1]
    union = area_a[:, None] + area_b[None, :] - intersection
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(union > 0, intersection / union, 0.0)


def _compressed_rle(rle):
    """A COCO RLE that pycocotools' iou takes: compressed counts (bytes or str); uncompressed
    (a list of run lengths) is converted."""
    import pycocotools.mask as mask_util

    if isinstance(rle.get("counts"), list):
        height, width = rle["size"]
        return mask_util.frPyObjects(rle, height, width)
    return rle


def mask_iou(rle_a, rle_b):
    """IoU of two single-mask RLEs; 0 when their image sizes differ, 1 when both are empty
    (pycocotools says 0 there, but two empty masks agree: Detectron2 pastes an empty mask for
    a box thinner than a pixel that covers no pixel centre)."""
    import pycocotools.mask as mask_util

    if list(rle_a["size"]) != list(rle_b["size"]):
        return 0.0
    rle_a, rle_b = _compressed_rle(rle_a), _compressed_rle(rle_b)
    if mask_util.area(rle_a) == 0 and mask_util.area(rle_b) == 0:
        return 1.0
    return float(mask_util.iou([rle_a], [rle_b], [0])[0, 0])


def _detections(entry):
    boxes = np.asarray(entry.get("boxes", []), dtype=np.float64).reshape(-1, 4)
    scores = np.asarray(entry.get("scores", []), dtype=np.float64).reshape(-1)
    classes = np.asarray(entry.get("classes", []), dtype=np.int64).reshape(-1)
    if not len(boxes) == len(scores) == len(classes):
        raise ValueError(f"boxes/scores/classes lengths differ: {len(boxes)}, {len(scores)}, {len(classes)}")
    masks = entry.get("masks")
    if masks is not None and len(masks) != len(boxes):
        raise ValueError(f"{len(masks)} masks for {len(boxes)} boxes")
    keypoints = entry.get("keypoints")
    if keypoints is not None:
        keypoints = np.asarray(keypoints, dtype=np.float64).reshape(len(boxes), -1, 3)
    return boxes, scores, classes, masks, keypoints


def keypoint_agreement(ref_points, our_points, tolerance=KEYPOINT_TOLERANCE_PX):
    """(points within tolerance in x and y, points, max |dxy|, max |dscore|) of one pair."""
    diff = np.abs(ref_points[:, :2] - our_points[:, :2]).max(axis=1)
    return (int((diff <= tolerance).sum()), len(diff), float(diff.max(initial=0.0)),
            float(np.abs(ref_points[:, 2] - our_points[:, 2]).max(initial=0.0)))


def compare_image(reference, ours, box_tolerance=BOX_TOLERANCE_PX, score_tolerance=SCORE_TOLERANCE,
                  keypoint_tolerance=KEYPOINT_TOLERANCE_PX):
    """Matches one image's detections (see the module doc). `reference` is Detectron2's entry,
    `ours` ours (None when we produced nothing for the image). Returns a dict of counts,
    differences and the pairs [(reference index, our index, max |box diff|, |score diff|,
    matched, mask IoU or None)]."""
    ref_boxes, ref_scores, ref_classes, ref_masks, ref_points = _detections(reference)
    our_boxes, our_scores, our_classes, our_masks, our_points = _detections(ours or {})
    points_compared = ref_points is not None and our_points is not None
    keypoints_close = keypoints_total = 0
    keypoint_max_diff = keypoint_max_score_diff = 0.0
    iou = box_iou(ref_boxes, our_boxes)
    taken = np.zeros(len(our_boxes), dtype=bool)
    pairs = []
    # Stable order: equal scores keep Detectron2's output order.
    for i in np.argsort(-ref_scores, kind="stable"):
        candidates = (our_classes == ref_classes[i]) & ~taken & (iou[i] > 0)
        if not candidates.any():
            continue
        j = int(np.argmax(np.where(candidates, iou[i], -1.0)))
        taken[j] = True
        box_diff = float(np.abs(ref_boxes[i] - our_boxes[j]).max())
        score_diff = float(abs(ref_scores[i] - our_scores[j]))
        matched = box_diff <= box_tolerance and score_diff <= score_tolerance
        pair_mask_iou = None
        if matched and ref_masks is not None and our_masks is not None:
            pair_mask_iou = mask_iou(ref_masks[i], our_masks[j])
        if matched and points_compared:
            close, count, worst, worst_score = keypoint_agreement(ref_points[i], our_points[j], keypoint_tolerance)
            keypoints_close += close
            keypoints_total += count
            keypoint_max_diff = max(keypoint_max_diff, worst)
            keypoint_max_score_diff = max(keypoint_max_score_diff, worst_score)
        pairs.append((int(i), j, box_diff, score_diff, matched, pair_mask_iou))
    matched_pairs = [p for p in pairs if p[4]]
    outside = [p for p in pairs if not p[4]]
    mask_ious = [p[5] for p in matched_pairs if p[5] is not None]
    return {
        "reference": len(ref_boxes),
        "ours": len(our_boxes),
        "matched": len(matched_pairs),
        "fraction": len(matched_pairs) / len(ref_boxes) if len(ref_boxes) else 1.0,
        "max_box_diff": max((p[2] for p in matched_pairs), default=0.0),
        "max_score_diff": max((p[3] for p in matched_pairs), default=0.0),
        "paired_outside_tolerance": len(outside),
        "outside_max_box_diff": max((p[2] for p in outside), default=None),
        "outside_max_score_diff": max((p[3] for p in outside), default=None),
        "unpaired_reference": len(ref_boxes) - len(pairs),
        "unpaired_ours": int((~taken).sum()),
        "mask_ious": mask_ious,
        "mean_mask_iou": float(np.mean(mask_ious)) if mask_ious else None,
        "masks_compared": ref_masks is not None and our_masks is not None,
        "keypoints_compared": points_compared,
        "keypoints_close": keypoints_close,
        "keypoints_total": keypoints_total,
        "keypoint_max_diff": keypoint_max_diff,
        "keypoint_max_score_diff": keypoint_max_score_diff,
        "pairs": pairs,
    }


def compare_predictions(expected, predicted, box_tolerance=BOX_TOLERANCE_PX, score_tolerance=SCORE_TOLERANCE,
                        keypoint_tolerance=KEYPOINT_TOLERANCE_PX):
    """Compares every image of `expected` (Detectron2) with `predicted` (ours); both
    {image name: entry}. An image missing from `predicted` counts as no detections.
    Returns {"images": {name: compare_image result}, "total": the same fields summed, with
    fraction = matched / reference over all images and mean_mask_iou over all matched pairs}."""
    images = {}
    for name in sorted(expected):
        images[name] = compare_image(expected[name], predicted.get(name), box_tolerance, score_tolerance,
                                     keypoint_tolerance)
    reference = sum(r["reference"] for r in images.values())
    matched = sum(r["matched"] for r in images.values())
    mask_ious = [v for r in images.values() for v in r["mask_ious"]]
    outside_box = [r["outside_max_box_diff"] for r in images.values() if r["outside_max_box_diff"] is not None]
    outside_score = [r["outside_max_score_diff"] for r in images.values() if r["outside_max_score_diff"] is not None]
    total = {
        "reference": reference,
        "ours": sum(r["ours"] for r in images.values()),
        "matched": matched,
        "fraction": matched / reference if reference else 1.0,
        "max_box_diff": max((r["max_box_diff"] for r in images.values()), default=0.0),
        "max_score_diff": max((r["max_score_diff"] for r in images.values()), default=0.0),
        "paired_outside_tolerance": sum(r["paired_outside_tolerance"] for r in images.values()),
        "outside_max_box_diff": max(outside_box, default=None),
        "outside_max_score_diff": max(outside_score, default=None),
        "unpaired_reference": sum(r["unpaired_reference"] for r in images.values()),
        "unpaired_ours": sum(r["unpaired_ours"] for r in images.values()),
        "mean_mask_iou": float(np.mean(mask_ious)) if mask_ious else None,
        "min_mask_iou": float(np.min(mask_ious)) if mask_ious else None,
        "masks_compared": any(r["masks_compared"] for r in images.values()),
        "keypoints_compared": any(r["keypoints_compared"] for r in images.values()),
        "keypoints_close": sum(r["keypoints_close"] for r in images.values()),
        "keypoints_total": sum(r["keypoints_total"] for r in images.values()),
        "keypoint_fraction": (sum(r["keypoints_close"] for r in images.values()) /
                              max(1, sum(r["keypoints_total"] for r in images.values()))),
        "keypoint_max_diff": max((r["keypoint_max_diff"] for r in images.values()), default=0.0),
        "keypoint_max_score_diff": max((r["keypoint_max_score_diff"] for r in images.values()), default=0.0),
        "extra_images_in_ours": sorted(set(predicted) - set(expected)),
    }
    return {"images": images, "total": total}


def format_table(result):
    """The comparison as a fixed-width text table, one row per image and a total row."""
    def number(value, fmt):
        return "-" if value is None else format(value, fmt)

    header = (f"{'image':<34} {'d2':>4} {'ours':>4} {'match':>5} {'frac':>7} {'max|dbox|':>10} "
              f"{'max|dscore|':>11} {'mask IoU':>9} {'outside':>7} {'unpaired d2/ours':>16}")
    lines = [header, "-" * len(header)]
    rows = list(result["images"].items()) + [("TOTAL", result["total"])]
    for name, row in rows:
        lines.append(
            f"{name[:34]:<34} {row['reference']:>4} {row['ours']:>4} {row['matched']:>5} "
            f"{row['fraction']:>7.2%} {row['max_box_diff']:>10.2e} {row['max_score_diff']:>11.2e} "
            f"{number(row['mean_mask_iou'], '.4f'):>9} {row['paired_outside_tolerance']:>7} "
            f"{str(row['unpaired_reference']) + '/' + str(row['unpaired_ours']):>16}")
    total = result["total"]
    if total["paired_outside_tolerance"]:
        lines.append(f"pairs outside tolerance: worst |dbox| {number(total['outside_max_box_diff'], '.3g')} px, "
                     f"worst |dscore| {number(total['outside_max_score_diff'], '.3g')}")
    if total["min_mask_iou"] is not None:
        lines.append(f"mask IoU over {total['matched']} matched detections: mean {total['mean_mask_iou']:.4f}, "
                     f"min {total['min_mask_iou']:.4f}")
    if total["keypoints_compared"]:
        lines.append(f"keypoints of matched detections within tolerance: {total['keypoints_close']} of "
                     f"{total['keypoints_total']} ({total['keypoint_fraction']:.2%}); max |dxy| "
                     f"{total['keypoint_max_diff']:.3g} px, max |dscore| {total['keypoint_max_score_diff']:.3g}")
    if total["extra_images_in_ours"]:
        lines.append(f"images only in ours (ignored): {', '.join(total['extra_images_in_ours'])}")
    return "\n".join(lines)


def _reference_from_detectron2(args, names):
    """Runs Detectron2's DefaultPredictor (through detectron2_golden.py) on the named images."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import detectron2_golden as golden

    golden.import_detectron2(os.path.abspath(args.detectron2))
    config_yaml = args.config_yaml
    if config_yaml is None and args.golden and os.path.exists(os.path.join(args.golden, "config.yaml")):
        config_yaml = os.path.join(args.golden, "config.yaml")
    if config_yaml is None and args.config_file is None:
        raise SystemExit("--config-file (a zoo config name) or --config-yaml is needed to run Detectron2")
    cfg = golden.build_cfg(os.path.abspath(args.detectron2), args.config_file, config_yaml=config_yaml)
    weights = args.weights or os.path.join(args.golden, "model_final.pth")
    images = [(name, golden.read_rgb(os.path.join(args.images, name))) for name in names]
    expected, _ = golden.run_default_predictor(cfg, weights, images, require_identity_resize=False)
    return expected


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ours", required=True, help="our predictions, JSON in expected.json's format")
    parser.add_argument("--golden", help="a golden directory (expected.json, config.yaml, model_final.pth)")
    parser.add_argument("--expected", help="Detectron2's predictions as JSON (default: <golden>/expected.json)")
    parser.add_argument("--detectron2", help="Detectron2 source folder (detectron2/, configs/), to run it now")
    parser.add_argument("--config-file", help="zoo config name under <detectron2>/configs, e.g. "
                        "COCO-InstanceSegmentation/mask_rcnn_R_50_FPN_3x.yaml")
    parser.add_argument("--config-yaml", help="a cfg.dump() file (default: <golden>/config.yaml when present)")
    parser.add_argument("--weights", help="checkpoint for Detectron2 (.pth or .pkl); implies running it")
    parser.add_argument("--rerun", action="store_true", help="run Detectron2 on <golden>'s checkpoint instead "
                        "of reading expected.json")
    parser.add_argument("--images", help="image folder (default: <golden>/../images)")
    parser.add_argument("--box-tolerance", type=float, default=BOX_TOLERANCE_PX)
    parser.add_argument("--score-tolerance", type=float, default=SCORE_TOLERANCE)
    parser.add_argument("--keypoint-tolerance", type=float, default=KEYPOINT_TOLERANCE_PX)
    parser.add_argument("--json-out", help="write the full comparison (per image, per pair) here")
    parser.add_argument("--min-fraction", type=float, help="exit 1 when the total matched fraction is lower")
    parser.add_argument("--min-mask-iou", type=float, help="exit 1 when the mean mask IoU is lower")
    args = parser.parse_args()

    with open(args.ours) as handle:
        predicted = json.load(handle)
    if args.images is None and args.golden:
        args.images = os.path.join(args.golden, "..", "images")
    if args.weights or args.rerun:
        if not args.detectron2:
            raise SystemExit("running Detectron2 needs --detectron2")
        if not args.images:
            raise SystemExit("running Detectron2 needs --images (or --golden)")
        if args.rerun and not args.golden and not args.weights:
            raise SystemExit("--rerun needs --golden or --weights")
        expected = _reference_from_detectron2(args, sorted(predicted))
    else:
        path = args.expected or (os.path.join(args.golden, "expected.json") if args.golden else None)
        if path is None:
            raise SystemExit("give --golden, --expected, or --weights with --detectron2")
        with open(path) as handle:
            expected = json.load(handle)

    result = compare_predictions(expected, predicted, args.box_tolerance, args.score_tolerance,
                                 args.keypoint_tolerance)
    print(format_table(result))
    if args.json_out:
        with open(args.json_out, "w") as handle:
            json.dump(result, handle, indent=1)
    failed = False
    if args.min_fraction is not None and result["total"]["fraction"] < args.min_fraction:
        print(f"FAIL: matched fraction {result['total']['fraction']:.4f} < {args.min_fraction}")
        failed = True
    mean_iou = result["total"]["mean_mask_iou"]
    if args.min_mask_iou is not None and result["total"]["masks_compared"] and (mean_iou or 0.0) < args.min_mask_iou:
        print(f"FAIL: mean mask IoU {mean_iou} < {args.min_mask_iou}")
        failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
