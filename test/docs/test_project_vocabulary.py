"""The project speaks only of itself: no tracked file numbers the work periods in which
something was done, or describes a GPU machine handed out for a while together with the tool
and the time allowance that came with it. A user has none of these; a figure carries its
date, its commit and the machine it was measured on instead ("2026-11-26, commit 9cc68cb, one
NVIDIA H100"; "a 2-vCPU x86-64 machine"), and the GPU check is a check to run on any NVIDIA
host.

- Every tracked file (`git ls-files`) is read: code, comments, scripts, tests, docs, bench
  scripts. Binary files (a NUL byte, or not UTF-8) are skipped, and so is the golden JSON data
  under test/data/; text docs there are read.
- A line fails when it matches one of PATTERNS; the failure names each file:line.
- The patterns are built from pieces, so that this file's own text does not match them and
  it needs no exception.
"""
import pathlib
import re
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

# (pattern, what it catches). Each one is put together from pieces: written whole, it
# would match this file.
PATTERNS = [
    (re.compile(r"(?i)\bsessions?" + r" [0-9]"), "a numbered work period"),
    (re.compile(r"(?i)\b" + "le" + r"nt\b"), "a machine handed out for a while"),
    (re.compile(r"(?i)device" + " tool"), "the tool that ran commands on such a machine"),
    (re.compile(r"(?i)device" + " budget"), "that machine's time allowance"),
    (re.compile(r"(?i)\bbor" + r"rowed (gpu|machine|host)"), "a machine handed out for a while"),
]

# Golden data: generated numbers, not prose (test/data/README-style docs are still read).
GOLDEN_DATA_DIR = "test/data/"
GOLDEN_DATA_SUFFIXES = {".json"}


def tracked_files():
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True,
                             capture_output=True).stdout
    except (OSError, subprocess.CalledProcessError) as error:
        pytest.skip(f"not a git checkout ({error}); cannot list the tracked files")
    return sorted(name for name in out.decode().split("\0") if name)


def is_golden_data(name):
    path = pathlib.PurePosixPath(name)
    return name.startswith(GOLDEN_DATA_DIR) and path.suffix in GOLDEN_DATA_SUFFIXES


def text_of(name):
    """The file's text, or None for what is not read: binary files, golden data, and paths
    that are not a regular file in the working tree (deleted, a submodule)."""
    path = ROOT / name
    if is_golden_data(name) or not path.is_file():
        return None
    data = path.read_bytes()
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def offending_lines(name, text):
    for number, line in enumerate(text.splitlines(), start=1):
        for pattern, what in PATTERNS:
            match = pattern.search(line)
            if match:
                yield f"{name}:{number}: \"{match.group(0)}\" ({what}): {line.strip()[:160]}"


def test_no_work_period_or_handed_out_machine_vocabulary():
    offenders = []
    for name in tracked_files():
        text = text_of(name)
        if text is not None:
            offenders.extend(offending_lines(name, text))
    assert not offenders, (
        "these lines number work periods or describe a machine handed out for a while; say what "
        "the software does and what was measured instead: a figure's date, its commit and its "
        "machine (\"a 2-vCPU x86-64 machine\", \"an H200\"):\n" + "\n".join(offenders))


# Samples assembled at run time, so that this file's text holds none of them.
FORBIDDEN_SAMPLES = [
    "measured in " + "session" + " 23",
    "Sess" + "ions 13-14 on the dev VM",
    "(" + "session" + " 17, warm)",
    "on the " + "le" + "nt GPU",
    "when a GPU machine is " + "le" + "nt",
    "through the " + "device" + " tool",
    "the 15-minute " + "device" + " budget",
    "a " + "bor" + "rowed GPU",
    "the " + "bor" + "rowed host",
]
ALLOWED_SAMPLES = [
    "the HTTP session reads one request after another",
    "pytest keeps the last three runs' folders",
    "a lentil, silent, relentless",
    "on an H200 host (2026-11-26, commit b2d0f90)",
    "the check's wall-clock time limit (--budget-s)",
    "the device's memory budget",
]


@pytest.mark.parametrize("sample", FORBIDDEN_SAMPLES)
def test_patterns_catch_the_vocabulary(sample):
    assert list(offending_lines("sample", sample)), f"no pattern matches {sample!r}"


@pytest.mark.parametrize("sample", ALLOWED_SAMPLES)
def test_patterns_leave_ordinary_words_alone(sample):
    assert not list(offending_lines("sample", sample)), f"a pattern matches {sample!r}"


def test_golden_data_and_binaries_are_all_that_is_skipped():
    assert is_golden_data("test/data/detectron2/mask_rcnn_R_50_FPN/intermediates.json")
    assert not is_golden_data("test/data/detectron2/README.md")
    assert not is_golden_data("configs/demo.json")
