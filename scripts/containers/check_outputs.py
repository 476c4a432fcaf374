"""Checks scripts/test-containers.sh makes on what the containers wrote (standard library only).

  metric-regexes LOG DEFINITIONS [ABSENT...]
                                   every regex of `trainer metric-definitions` matches a line
                                   of LOG, with a number in its group (SageMaker's rule), but
                                   the metrics named ABSENT, which LOG's job cannot print
                                   (train:loss_scale without fp16): they must match no line
  same-weights A B                 two safetensors files hold the same tensors bit for bit, and
                                   they are not the initial ones (INITIAL, optional third file)
  same-detections SERVED PREDICTED served /invocations JSON equals `trainer predict`'s COCO
                                   results for image id 1: same count, categories, RLE masks;
                                   scores within 1e-4 and boxes within 0.01 px (the server and
                                   predict may use different intra-op thread counts, which
                                   changes float sums in the last bits)
  close-detections A B             two served /invocations JSON answers for one image from
                                   different machines' arithmetic (the arm64 image under qemu
                                   against the x86 CPU image, both fp32): the same detections,
                                   paired by category and box, scores within 2e-3, box corners
                                   within 0.5 px, mask IoU at least 0.98; prints the largest
                                   differences seen
  classes CLASSES_JSON NAME...     the model's classes.json names exactly these categories
Each prints one line saying what held, or exits 1 naming what did not.
"""
import json
import re
import struct
import sys


def fail(message):
    print(f"check_outputs.py: {message}", file=sys.stderr)
    sys.exit(1)


def metric_regexes(log_path, definitions_path, *absent):
    lines = open(log_path, encoding="utf-8", errors="replace").read().splitlines()
    definitions = json.load(open(definitions_path))
    if not definitions:
        fail(f"{definitions_path} lists no metric definitions")
    unknown = set(absent) - {d["Name"] for d in definitions}
    if unknown:
        fail(f"{definitions_path} defines no metric {', '.join(sorted(unknown))}")
    missing = []
    for d in definitions:
        pattern = re.compile(d["Regex"])
        values = [m.group(1) for m in map(pattern.search, lines) if m]
        if d["Name"] in absent:
            if values:
                fail(f'{d["Name"]} should not appear in {log_path}, but its regex captured "{values[-1]}"')
            continue
        if not values:
            missing.append(d["Name"])
            continue
        try:
            float(values[-1])
        except ValueError:
            fail(f'{d["Name"]}: the regex captured "{values[-1]}", not a number')
    if missing:
        fail(f"no line of {log_path} matches the regex of: {', '.join(missing)}")
    print(f"all {len(definitions) - len(absent)} metric regexes match a line with a number"
          + (f" ({', '.join(absent)} absent, as it should be)" if absent else ""))


def read_safetensors(path):
    with open(path, "rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(size))
        data = f.read()
    header.pop("__metadata__", None)
    return {name: data[t["data_offsets"][0]:t["data_offsets"][1]] for name, t in header.items()}


def same_weights(a_path, b_path, initial_path=None):
    a, b = read_safetensors(a_path), read_safetensors(b_path)
    if a.keys() != b.keys():
        fail(f"{a_path} and {b_path} hold different tensors: {sorted(a.keys() ^ b.keys())[:5]}")
    differ = [name for name in a if a[name] != b[name]]
    if differ:
        fail(f"{len(differ)} tensors differ between {a_path} and {b_path}, e.g. {differ[:3]}")
    moved = ""
    if initial_path:
        initial = read_safetensors(initial_path)
        changed = sum(1 for name in a if initial.get(name) != a[name])
        if changed == 0:
            fail(f"{a_path} equals the initial weights {initial_path}: training changed nothing")
        moved = f", {changed} of them changed by training"
    print(f"{len(a)} tensors bit-identical{moved}")


def same_detections(served_path, predicted_path):
    served = json.load(open(served_path))["detections"]
    predicted = [r for r in json.load(open(predicted_path)) if r["image_id"] == 1]
    if len(served) != len(predicted) or not served:
        fail(f"the server answered {len(served)} detections, trainer predict {len(predicted)}")
    for i, (got, want) in enumerate(zip(served, predicted)):
        x, y, w, h = want["bbox"]
        checks = {
            "category_id": got["category_id"] == want["category_id"],
            "score": abs(got["score"] - want["score"]) <= 1e-4,
            "box": all(abs(g - e) <= 0.01 for g, e in zip(got["box"], [x, y, x + w, y + h])),
            "mask": got["mask"] == want["segmentation"],
        }
        wrong = [k for k, ok in checks.items() if not ok]
        if wrong:
            fail(f"detection {i} differs in {', '.join(wrong)}: served {json.dumps(got)[:300]}, "
                 f"predicted {json.dumps(want)[:300]}")
    print(f"{len(served)} detections equal trainer predict's (category, score, box, RLE mask)")


def rle_area_mask(rle):
    """A COCO compressed RLE ({"size": [h, w], "counts": str}) as a bytearray, column-major."""
    h, w = rle["size"]
    text, counts, p = rle["counts"], [], 0
    while p < len(text):
        x, k, more = 0, 0, True
        while more:
            c = ord(text[p]) - 48
            x |= (c & 0x1F) << (5 * k)
            more = bool(c & 0x20)
            p, k = p + 1, k + 1
            if not more and c & 0x10:
                x |= -1 << (5 * k)
        if len(counts) > 2:
            x += counts[-2]
        counts.append(x)
    mask, at, value = bytearray(h * w), 0, 0
    for run in counts:
        if value:
            mask[at:at + run] = b"\x01" * run
        at, value = at + run, 1 - value
    if at != h * w:
        fail(f"an RLE mask covers {at} pixels, its size says {h}x{w}")
    return mask


def rle_mask_iou(a, b):
    """The IoU of two COCO compressed RLE masks of one size (1.0 when both are empty)."""
    ma, mb = rle_area_mask(a), rle_area_mask(b)
    inter = sum(1 for x, y in zip(ma, mb) if x and y)
    union = sum(1 for x, y in zip(ma, mb) if x or y)
    return inter / union if union else 1.0


def box_iou(a, b):
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - ix * iy
    return ix * iy / union if union > 0 else 0.0


def close_detections(a_path, b_path, score_tol=2e-3, box_tol=0.5, min_mask_iou=0.98):
    a, b = (json.load(open(p)) for p in (a_path, b_path))
    if (a.get("width"), a.get("height")) != (b.get("width"), b.get("height")):
        fail(f"the answers are for {a.get('width')}x{a.get('height')} and {b.get('width')}x{b.get('height')}")
    da, db = a["detections"], b["detections"]
    if len(da) != len(db) or not da:
        fail(f"{a_path} has {len(da)} detections, {b_path} {len(db)}")
    unmatched, worst = list(range(len(db))), {"score": 0.0, "box": 0.0, "mask_iou": 1.0}
    for i, got in enumerate(da):
        same_class = [j for j in unmatched if db[j]["category_id"] == got["category_id"]]
        if not same_class:
            fail(f"detection {i} of {a_path} ({got['label']}, score {got['score']:.4f}) has no partner left in {b_path}")
        j = max(same_class, key=lambda j: box_iou(got["box"], db[j]["box"]))
        unmatched.remove(j)
        want = db[j]
        score = abs(got["score"] - want["score"])
        box = max(abs(g - e) for g, e in zip(got["box"], want["box"]))
        mask_iou = rle_mask_iou(got["mask"], want["mask"])
        if score > score_tol or box > box_tol or mask_iou < min_mask_iou:
            fail(f"detection {i} ({got['label']}): score differs by {score:.2e} (limit {score_tol}), box by "
                 f"{box:.3f} px (limit {box_tol}), mask IoU {mask_iou:.4f} (floor {min_mask_iou}): "
                 f"{json.dumps(got)[:200]} vs {json.dumps(want)[:200]}")
        worst = {"score": max(worst["score"], score), "box": max(worst["box"], box),
                 "mask_iou": min(worst["mask_iou"], mask_iou)}
    print(f"{len(da)} detections paired (category, box): largest score difference {worst['score']:.1e}, "
          f"box corner {worst['box']:.4f} px, smallest mask IoU {worst['mask_iou']:.4f}")


def classes(path, *names):
    got = [c["name"] for c in json.load(open(path))]
    if got != list(names):
        fail(f"{path} names {got}, expected {list(names)}")
    print(f"classes.json names {got}")


COMMANDS = {"metric-regexes": metric_regexes, "same-weights": same_weights,
            "same-detections": same_detections, "close-detections": close_detections, "classes": classes}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        fail(f"usage: check_outputs.py {{{'|'.join(COMMANDS)}}} ARGS...")
    COMMANDS[sys.argv[1]](*sys.argv[2:])
