"""download/ is Torch-free and depends on common/ and tracking/ alone (docs/architecture.md);
the server never downloads: nothing in serving/ includes download/ or the engine's fetch, and
its CMake links no download library."""
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
INCLUDE = re.compile(r'^\s*#\s*include\s+[<"]([^">]+)[">]', re.MULTILINE)


def includes(folder: str):
    for path in sorted((ROOT / folder).rglob("*")):
        if path.suffix in {".h", ".cpp"}:
            for target in INCLUDE.findall(path.read_text(encoding="utf-8")):
                yield path.relative_to(ROOT), target


def test_download_includes_only_common_tracking_and_itself_and_no_torch():
    ours = ("common/", "tracking/", "download/")
    offenders = [(str(p), t) for p, t in includes("download")
                 if t.startswith(("torch/", "ATen/", "c10/", "trainer/", "serving/", "kernels/", "entrypoint/"))
                 or ("/" in t and t.split("/")[0] in {"common", "tracking", "download", "trainer"}
                     and not t.startswith(ours))]
    assert not offenders, offenders


def test_the_server_never_downloads():
    offenders = [(str(p), t) for p, t in includes("serving")
                 if t.startswith("download/") or t.endswith("weights_fetch.h")]
    assert not offenders, offenders
    cmake = "\n".join(p.read_text() for p in (ROOT / "serving").rglob("CMakeLists.txt"))
    assert "mrcnn_download" not in cmake


def test_the_checks_see_what_they_check():
    assert any(t == "tracking/aws_sigv4.h" for _, t in includes("download"))
    assert any(t.startswith("serving/") for _, t in includes("serving"))
