"""serving/'s folders depend on each other one way (serving/README.md, docs/architecture.md).

Every `#include "serving/..."` in serving/ is checked against what its folder may include:

    metrics/ metrics/ (the numbers for Prometheus: a leaf everyone may report to)
    http/    http/, metrics/
    codec/   codec/, models/predictor.h (the model's input and output types),
             http/http_error.h (a refusal)
    models/  models/, metrics/, http/log_line.h
    routes/  routes/, http/, codec/, models/, metrics/, server_config.h
    the top  (main.cpp, server_config.*) anything

so http knows nothing of models or routes, codec nothing of HTTP but its error type, models
nothing of HTTP (but the log line), routes or codec, and nothing below the top includes main's
wiring. The two headers others may take from http/ include nothing of serving.
"""
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SERVING = ROOT / "serving"
INCLUDE = re.compile(r'^\s*#\s*include\s+"(serving/[^"]+)"', re.MULTILINE)

SHARED = {"serving/http/http_error.h", "serving/http/log_line.h"}
ALLOWED = {
    "metrics": ({"serving/metrics/"}, set()),
    "http": ({"serving/http/", "serving/metrics/"}, set()),
    "codec": ({"serving/codec/"}, {"serving/models/predictor.h", "serving/http/http_error.h"}),
    "models": ({"serving/models/", "serving/metrics/"}, {"serving/http/log_line.h"}),
    "routes": ({"serving/routes/", "serving/http/", "serving/codec/", "serving/models/",
                "serving/metrics/"}, {"serving/server_config.h"}),
}


def test_the_top_holds_main_and_the_server_config_alone():
    top = sorted(p.name for p in SERVING.iterdir() if p.is_file() and p.suffix in {".h", ".cpp"})
    assert top == ["main.cpp", "server_config.cpp", "server_config.h"]


def sources(folder):
    return sorted(p for p in (SERVING / folder).rglob("*") if p.suffix in {".h", ".cpp"})


def test_every_subfolder_has_rules_and_a_readme():
    subfolders = sorted(p.name for p in SERVING.iterdir() if p.is_dir())
    assert subfolders == sorted(ALLOWED), "a new folder in serving/ needs its rules here"
    for name in subfolders:
        assert (SERVING / name / "README.md").is_file(), f"serving/{name}/ has no README.md"


@pytest.mark.parametrize("folder", sorted(ALLOWED))
def test_includes_point_one_way(folder):
    prefixes, files = ALLOWED[folder]
    offenders = []
    for path in sources(folder):
        for target in INCLUDE.findall(path.read_text(encoding="utf-8")):
            if target in files or any(target.startswith(prefix) for prefix in prefixes):
                continue
            offenders.append(f"{path.relative_to(ROOT)} includes {target}")
    assert sources(folder), f"serving/{folder}/ has no sources"
    assert not offenders, f"serving/{folder}/ may not include these:\n" + "\n".join(offenders)


def test_the_shared_headers_include_nothing_of_serving():
    for name in SHARED:
        assert not INCLUDE.findall((ROOT / name).read_text(encoding="utf-8")), name


def test_the_include_pattern_finds_includes():
    sample = '#include <vector>\n#include "serving/http/route.h"\n  # include "serving/http/log_line.h"\n'
    assert INCLUDE.findall(sample) == ["serving/http/route.h", "serving/http/log_line.h"]
