"""What can be checked of the Dockerfiles without a Docker engine: every COPY source
exists in the build context, ENTRYPOINT is exec form (so the supervisor is PID 1 and gets
SIGTERM), the configs the images name exist and load, the base images are what the
project promises."""
import json
import pathlib
import re
import shlex

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCKERFILES = ["Dockerfile", "Dockerfile.dronetraining"]


def instructions(name):
    """(INSTRUCTION, argument text) with line continuations joined and comments dropped."""
    text = (ROOT / name).read_text()
    joined, current = [], ""
    for raw in text.splitlines():
        line = raw.strip()
        if not current and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        current += line
        joined.append(current)
        current = ""
    assert not current, f"{name}: dangling line continuation"
    out = []
    for line in joined:
        word, _, rest = line.partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


@pytest.mark.parametrize("name", DOCKERFILES)
def test_copy_sources_exist(name):
    copies = [rest for word, rest in instructions(name) if word in ("COPY", "ADD")]
    assert copies, f"{name} copies nothing"
    for rest in copies:
        if rest.startswith("["):
            parts = json.loads(rest)
        else:
            parts = [p for p in shlex.split(rest) if not p.startswith("--")]
        assert len(parts) >= 2, rest
        for source in parts[:-1]:
            matches = list(ROOT.glob(source.rstrip("/")))
            assert matches, f"{name}: COPY source {source} does not exist in the build context"


@pytest.mark.parametrize("name", DOCKERFILES)
def test_entrypoint_is_exec_form(name):
    entry = [rest for word, rest in instructions(name) if word == "ENTRYPOINT"]
    assert entry, f"{name} has no ENTRYPOINT"
    value = json.loads(entry[-1])  # shell form is not JSON and fails here
    assert value == ["entrypoint"]
    assert not any(word == "CMD" for word, _ in instructions(name)), "CMD would be replaced by `train` anyway"


def test_training_image_base_and_torch_pin():
    ins = instructions("Dockerfile")
    assert ins[0][0] == "FROM" and re.match(r"nvidia/cuda:13\.\d+\.\d+-devel-", ins[0][1])
    runs = " ".join(rest for word, rest in ins if word == "RUN")
    assert "torch==2.11.0" in runs
    requirements = (ROOT / "scripts" / "requirements.txt").read_text()
    assert re.search(r"^torch==2\.11\.0", requirements, re.M), "image and setup.sh must pin one torch"


def configs_named(name):
    text = (ROOT / name).read_text()
    return sorted(set(re.findall(r"[\w./-]+\.yaml", text)))


@pytest.mark.parametrize("name", DOCKERFILES)
def test_named_configs_exist(name):
    named = configs_named(name)
    if name == "Dockerfile.dronetraining":
        assert "mask_rcnn_R_50_FPN_drone_finetune.yaml" in [pathlib.Path(n).name for n in named]
    for n in named:
        assert (ROOT / "configs" / pathlib.Path(n).name).is_file(), f"{name} names {n}, missing in configs/"


def test_drone_config_matches_its_categories():
    cats = json.loads((ROOT / "configs" / "drone" / "categories.json").read_text())
    text = (ROOT / "configs" / "mask_rcnn_R_50_FPN_drone_finetune.yaml").read_text()
    num = int(re.search(r"NUM_CLASSES:\s*(\d+)", text).group(1))
    assert num == len(cats)


def test_drone_image_default_config_is_shipped_in_it():
    ins = instructions("Dockerfile.dronetraining")
    env = " ".join(rest for word, rest in ins if word == "ENV")
    default = re.search(r"MRCNN_DEFAULT_CONFIG=(\S+)", env).group(1)
    copied = " ".join(rest for word, rest in ins if word == "COPY")
    assert default in copied, "the default config must be copied into the image"
    # Its _BASE_ chain must be in the base image's configs/ (the training image copies all).
    base = re.search(r"_BASE_:\s*(\S+)", (ROOT / "configs" / default).read_text()).group(1)
    assert (ROOT / "configs" / base).is_file()
    assert "COPY configs/ configs/" in [f"{w} {r}" for w, r in instructions("Dockerfile")]
