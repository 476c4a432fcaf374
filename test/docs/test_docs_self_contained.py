"""The documentation is self-contained: a clone of the repository is all a reader needs.

- No tracked file refers to documents outside the repository (a `shared/` folder beside
  the checkout); the runtime contract and the architecture live in docs/.
- docs/contract.md and docs/architecture.md exist.
- Every relative markdown link in README.md, docs/*.md and every README.md below the top
  points to a file or folder that exists inside the repository.
"""
import pathlib
import re
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
THIS = pathlib.Path(__file__).resolve().relative_to(ROOT).as_posix()

# Strings that point outside the repository (built so this file does not match itself).
OUTSIDE = [b".." + b"/shared", b"shared/" + b"CONTRACT.md", b"shared/" + b"DESIGN.md"]

# Tracked files allowed to keep such a string, with the reason. .ci/run describes the CI
# machine's checkout layout in a comment; it is CI plumbing, not documentation for users,
# and is left to whoever owns the CI entry.
ALLOWED = {
    THIS: "this test names the strings it looks for",
}

LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^\s*(```|~~~)")
INLINE_CODE = re.compile(r"`[^`]*`")
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def tracked_files():
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], check=True,
                             capture_output=True).stdout
    except (OSError, subprocess.CalledProcessError) as error:
        pytest.skip(f"not a git checkout ({error}); cannot list the tracked files")
    return [name for name in out.decode().split("\0") if name]


def markdown_files():
    files = {"README.md"}
    for name in tracked_files():
        path = pathlib.PurePosixPath(name)
        if path.name == "README.md" or (path.parent.as_posix() == "docs" and path.suffix == ".md"):
            files.add(name)
    for required in ("docs/contract.md", "docs/architecture.md"):
        files.add(required)
    return sorted(name for name in files if (ROOT / name).is_file())


def relative_links(text):
    """Link targets outside code blocks and inline code, without scheme links and pure anchors."""
    in_fence = False
    for number, line in enumerate(text.splitlines(), start=1):
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        for match in LINK.finditer(INLINE_CODE.sub("", line)):
            target = match.group(1)
            if target.startswith("#") or SCHEME.match(target):
                continue
            yield number, target


def test_no_references_outside_the_repository():
    offenders = []
    for name in tracked_files():
        if name in ALLOWED:
            continue
        path = ROOT / name
        if not path.is_file():
            continue  # deleted in the working tree
        data = path.read_bytes()
        for needle in OUTSIDE:
            if needle in data:
                line = data[: data.index(needle)].count(b"\n") + 1
                offenders.append(f"{name}:{line}: {needle.decode()}")
    assert not offenders, (
        "these files point outside the repository; refer to docs/contract.md or "
        "docs/architecture.md instead:\n" + "\n".join(offenders))


@pytest.mark.parametrize("name", ["docs/contract.md", "docs/architecture.md"])
def test_project_documents_exist(name):
    path = ROOT / name
    assert path.is_file(), f"{name} is missing"
    assert path.read_text(encoding="utf-8").startswith("# "), f"{name} has no title"


def test_readme_points_at_the_project_documents():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    targets = {target.split("#")[0] for _, target in relative_links(text)}
    assert {"docs/contract.md", "docs/architecture.md"} <= targets


def test_relative_markdown_links_resolve():
    broken = []
    for name in markdown_files():
        source = ROOT / name
        for number, target in relative_links(source.read_text(encoding="utf-8")):
            file_part = target.split("#")[0].split("?")[0]
            if not file_part:
                continue
            resolved = (ROOT / file_part.lstrip("/")) if file_part.startswith("/") \
                else (source.parent / file_part)
            resolved = resolved.resolve()
            if ROOT != resolved and ROOT not in resolved.parents:
                broken.append(f"{name}:{number}: {target} leaves the repository")
            elif not resolved.exists():
                broken.append(f"{name}:{number}: {target} does not exist")
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_link_pattern_finds_links():
    sample = "see [a](docs/a.md#x), ![img](b.png \"t\"), `[not](c.md)`, [web](https://x.y)"
    assert [t for _, t in relative_links(sample)] == ["docs/a.md#x", "b.png"]
