"""Large synthetic canvases of small shapes for the tiled-inference test and bench (issue 26):
circles, squares and triangles drawn like `trainer make-shapes` draws them (same outlines,
colours clearly distinct from a plain grey background, mild sensor noise), at positions the
caller chooses, with each shape's exact mask for scoring. Not a test module."""
import json
import math
import pathlib

import numpy as np
from PIL import Image, ImageDraw
from pycocotools import mask as mask_utils

NAMES = {1: "circle", 2: "square", 3: "triangle"}


def outline(category, cx, cy, r, angle):
    n = {1: 32, 2: 4, 3: 3}[category]
    return [(cx + r * math.cos(angle + 2 * math.pi * i / n), cy + r * math.sin(angle + 2 * math.pi * i / n))
            for i in range(n)]


def grid_shapes(width, height, count, size_range, rng, margin=4):
    """`count` shapes of diameter within size_range, on a jittered grid so none overlap."""
    cols = max(1, int(math.sqrt(count * width / height)))
    rows = math.ceil(count / cols)
    cell_w, cell_h = width / cols, height / rows
    cells = rng.permutation(rows * cols)[:count]
    shapes = []
    for cell in cells:
        row, col = divmod(int(cell), cols)
        d = rng.uniform(*size_range)
        r = d / 2
        slack_x = max(0.0, cell_w - d - 2 * margin)
        slack_y = max(0.0, cell_h - d - 2 * margin)
        cx = col * cell_w + margin + r + rng.uniform(0, slack_x)
        cy = row * cell_h + margin + r + rng.uniform(0, slack_y)
        shapes.append((int(rng.integers(1, 4)), cx, cy, r, rng.uniform(0, 2 * math.pi)))
    return shapes


def draw(width, height, shapes, rng):
    """RGB uint8 canvas and one COCO annotation per shape (bbox, RLE, category)."""
    bg = rng.integers(20, 91, size=3)
    img = np.empty((height, width, 3), np.uint8)
    img[:] = bg
    annotations = []
    for category, cx, cy, r, angle in shapes:
        while True:
            colour = rng.integers(0, 256, size=3)
            if np.abs(colour - bg).sum() > 200:
                break
        pts = outline(category, cx, cy, r, angle)
        x0, y0 = max(0, int(math.floor(cx - r)) - 1), max(0, int(math.floor(cy - r)) - 1)
        x1, y1 = min(width, int(math.ceil(cx + r)) + 2), min(height, int(math.ceil(cy + r)) + 2)
        local = Image.new("L", (x1 - x0, y1 - y0), 0)
        ImageDraw.Draw(local).polygon([(x - x0, y - y0) for x, y in pts], fill=1)
        m = np.asarray(local, dtype=bool)
        img[y0:y1, x0:x1][m] = colour
        full = np.zeros((height, width), np.uint8, order="F")
        full[y0:y1, x0:x1] = m
        rle = mask_utils.encode(full)
        annotations.append({"category_id": category, "bbox": [float(v) for v in mask_utils.toBbox(rle)],
                            "area": float(mask_utils.area(rle)), "segmentation": rle, "iscrowd": 0})
    noise = rng.normal(0, 6, size=img.shape)
    img = np.clip(img.astype(np.float64) + noise, 0, 255).astype(np.uint8)
    return img, annotations


def write(path: pathlib.Path, img):
    Image.fromarray(img).save(path)


def recall(annotations, detections, iou_type="bbox", threshold=0.5):
    """Fraction of the shapes matched one-to-one by a detection of their class with IoU >= threshold
    (greedy by score, as COCO matching)."""
    found = 0
    taken = set()
    by_score = sorted(range(len(detections)), key=lambda i: -detections[i]["score"])
    matched = [False] * len(annotations)
    for i in by_score:
        d = detections[i]
        best, best_iou = -1, threshold
        for j, a in enumerate(annotations):
            if matched[j] or a["category_id"] != d["category_id"]:
                continue
            if iou_type == "bbox":
                iou = mask_utils.iou([d["bbox"]], [a["bbox"]], [0])[0][0]
            else:
                iou = mask_utils.iou([d["segmentation"]], [a["segmentation"]], [0])[0][0]
            if iou >= best_iou:
                best, best_iou = j, iou
        if best >= 0:
            matched[best] = True
            found += 1
            taken.add(i)
    return found / max(1, len(annotations))


def rle_json(rle):
    return {"size": rle["size"], "counts": rle["counts"].decode() if isinstance(rle["counts"], bytes) else rle["counts"]}


def coco_json(path: pathlib.Path, file_name, width, height, annotations):
    anns = []
    for k, a in enumerate(annotations):
        anns.append({"id": k + 1, "image_id": 1, "category_id": a["category_id"], "bbox": a["bbox"],
                     "area": a["area"], "iscrowd": 0, "segmentation": rle_json(a["segmentation"])})
    path.write_text(json.dumps({
        "images": [{"id": 1, "file_name": file_name, "width": width, "height": height}],
        "annotations": anns,
        "categories": [{"id": c, "name": n, "supercategory": "shape"} for c, n in NAMES.items()]}))
