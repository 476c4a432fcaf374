"""Checks scripts/test-containers.sh makes on what the containers wrote (standard library only).

  metric-regexes LOG DEFINITIONS   every regex of `trainer metric-definitions` matches a line
                                   of LOG, with a number in its group (SageMaker's rule)
  same-weights A B                 two safetensors files hold the same tensors bit for bit, and
                                   they are not the initial ones (INITIAL, optional third file)
  same-detections SERVED PREDICTED served /invocations JSON equals `trainer predict`'s COCO
                                   results for image id 1: same count, categories, RLE masks;
                                   scores within 1e-4 and boxes within 0.01 px (the server and
                                   predict may use different intra-op thread counts, which
                                   changes float sums in the last bits)
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


def metric_regexes(log_path, definitions_path):
    lines = open(log_path, encoding="utf-8", errors="replace").read().splitlines()
    definitions = json.load(open(definitions_path))
    if not definitions:
        fail(f"{definitions_path} lists no metric definitions")
    missing = []
    for d in definitions:
        pattern = re.compile(d["Regex"])
        values = [m.group(1) for m in map(pattern.search, lines) if m]
        if not values:
            missing.append(d["Name"])
            continue
        try:
            float(values[-1])
        except ValueError:
            fail(f'{d["Name"]}: the regex captured "{values[-1]}", not a number')
    if missing:
        fail(f"no line of {log_path} matches the regex of: {', '.join(missing)}")
    print(f"all {len(definitions)} metric regexes match a line with a number")


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


def classes(path, *names):
    got = [c["name"] for c in json.load(open(path))]
    if got != list(names):
        fail(f"{path} names {got}, expected {list(names)}")
    print(f"classes.json names {got}")


COMMANDS = {"metric-regexes": metric_regexes, "same-weights": same_weights,
            "same-detections": same_detections, "classes": classes}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        fail(f"usage: check_outputs.py {{{'|'.join(COMMANDS)}}} ARGS...")
    COMMANDS[sys.argv[1]](*sys.argv[2:])
