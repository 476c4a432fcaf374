"""`trainer metric-definitions` regexes, checked with Python's `re` (the semantics
SageMaker applies) against lines from the trainer's own log formatter."""
import json
import os
import pathlib
import re
import subprocess

import pytest

BUILD = pathlib.Path(os.environ.get("MRCNN_BUILD_DIR", pathlib.Path(__file__).resolve().parents[3] / "build"))
TRAINER = BUILD / "bin" / "trainer"


def run(*args):
    if not TRAINER.exists():
        pytest.fail(f"{TRAINER} is not built (set MRCNN_BUILD_DIR)")
    return subprocess.run([str(TRAINER), *args], check=True, capture_output=True, text=True).stdout


def test_every_definition_matches_a_formatted_line_with_the_right_value():
    defs = json.loads(run("metric-definitions"))
    lines = run("metric-definitions", "--sample-lines").splitlines()
    assert len(defs) <= 40
    names = [d["Name"] for d in defs]
    assert len(set(names)) == len(names)
    for d in defs:
        assert set(d) == {"Name", "Regex"}
        assert len(d["Regex"]) <= 500
        pattern = re.compile(d["Regex"])
        assert pattern.groups >= 1, d
        hits = [m for m in map(pattern.search, lines) if m]
        assert hits, f"{d['Name']}: {d['Regex']} matches no line of\n" + "\n".join(lines)
        for m in hits:
            float(m.group(1))  # SageMaker parses the first group as a number

    # Values: train lines carry name: value; the regex must pick exactly that value.
    train = [l for l in lines if l.startswith("[train]")]
    evals = [l for l in lines if l.startswith("[eval]")]
    assert train and evals
    by_name = {d["Name"]: re.compile(d["Regex"]) for d in defs}
    for line in train:
        fields = dict(re.findall(r"(\S+): (\S+)", line))
        for name, value in fields.items():
            key = {"images/s": "images_per_sec", "max_mem": "max_mem_mb", "iter": "iteration",
                   "data_wait": "data_wait_percent"}.get(name, name)
            if f"train:{key}" not in by_name:
                continue
            got = by_name[f"train:{key}"].search(line).group(1)
            want = value.split("/")[0].removesuffix("MB").removesuffix("%")
            assert float(got) == float(want), (name, line)
        # No eval metric fires on a train line and vice versa.
        assert not any(by_name[n].search(line) for n in by_name if n.startswith("val:"))
    for line in evals:
        iou = next(t for t in ("bbox", "segm", "keypoints") if f" {t}/" in line)
        fields = dict(re.findall(r"(\S+): (\S+)", line))
        for name, pattern in by_name.items():
            if name.startswith("train:"):
                assert not pattern.search(line), (name, line)
            elif name.startswith(f"val:{iou}_"):
                ap = name.split("_", 1)[1]
                assert float(pattern.search(line).group(1)) == float(fields[f"{iou}/{ap}"])
            else:
                assert not pattern.search(line), (name, line)
