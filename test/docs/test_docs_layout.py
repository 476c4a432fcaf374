"""docs/architecture.md's folder layout table matches the tree.

- Every folder and file the table names exists.
- A named folder that has a README.md links it from its row.
- Every sub-folder of serving/ (http/, routes/, models/, codec/) and of trainer/model/ (its
  rooms) has a row of its own, so a folder added there must be added to the table too.
"""
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
ARCHITECTURE = ROOT / "docs" / "architecture.md"
CODE = re.compile(r"`([^`]+)`")
# Part folders whose sub-folders each need a row (their purpose is the layout's point).
FOLDERS_BY_PURPOSE = ["serving", "trainer/model"]


def layout_rows():
    """{name in the first column: the whole row} for the "## Folder layout" table."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    section = text.split("## Folder layout", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        if not line.startswith("| `"):
            continue
        first = line.split("|")[1]
        for name in CODE.findall(first):
            rows[name] = line
    assert rows, "docs/architecture.md has no folder layout table"
    return rows


def test_every_named_path_exists():
    missing = [name for name in layout_rows() if not (ROOT / name).exists()]
    assert not missing, "the layout table names paths that do not exist: " + ", ".join(missing)


def test_a_folder_with_a_readme_links_it():
    unlinked = []
    for name, row in layout_rows().items():
        folder = ROOT / name
        if name.endswith("/") and (folder / "README.md").is_file():
            if f"(../{name}README.md)" not in row:
                unlinked.append(name)
    assert not unlinked, "rows that do not link their folder's README: " + ", ".join(unlinked)


def test_folders_by_purpose_have_a_row_each():
    rows = layout_rows()
    missing = []
    for part in FOLDERS_BY_PURPOSE:
        assert f"{part}/" in rows, f"{part}/ has no row"
        for sub in sorted(p for p in (ROOT / part).iterdir() if p.is_dir()):
            name = f"{part}/{sub.name}/"
            if name not in rows:
                missing.append(name)
    assert not missing, "folders missing from docs/architecture.md's layout: " + ", ".join(missing)
