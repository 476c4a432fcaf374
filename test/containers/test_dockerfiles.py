"""What can be checked of the Dockerfiles without a Docker engine: every COPY source
exists in the build context, ENTRYPOINT is exec form (so the supervisor is PID 1 and gets
SIGTERM), the configs the images name exist and load, the base images are what the
project promises, and the training and serving Dockerfiles share their build stages word
for word. Building and running the images is scripts/test-containers.sh (podman, not CI)."""
import json
import pathlib
import re
import shlex

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCKERFILES = ["Dockerfile", "Dockerfile.serving", "Dockerfile.dronetraining"]


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
        if rest.startswith("--from="):
            continue  # copied from an earlier stage, not from the build context
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
    cmds = [rest for word, rest in instructions(name) if word == "CMD"]
    if name == "Dockerfile.serving":
        assert cmds and json.loads(cmds[-1]) == ["serve"], "a bare `docker run IMAGE` serves"
    else:
        assert not cmds, "CMD would be replaced by `train` anyway"


SERVING_DEVICES = ["cuda", "cpu", "cpu-arm64"]


def expand_device(text, device):
    """TEXT with ${DEVICE} and ${DEVICE:-default} replaced by DEVICE (or the default)."""
    text = re.sub(r"\$\{DEVICE:-(\w+)\}", lambda m: device or m.group(1), text)
    return text.replace("${DEVICE}", device or "")


@pytest.mark.parametrize("name", ["Dockerfile", "Dockerfile.serving"])
def test_images_are_debian_and_pin_setup_shs_torch(name):
    ins = instructions(name)
    global_args = dict(rest.split("=", 1) for word, rest in ins[:next(i for i, (w, _) in enumerate(ins) if w == "FROM")]
                       if word == "ARG" and "=" in rest)
    for device in SERVING_DEVICES + [None]:  # None: DEVICE not given, the FROM line's default
        stages = []
        for word, rest in ins:
            if word == "FROM":
                base, _, alias = rest.partition(" AS ")
                base = expand_device(base, device)
                # The arm64 stage: an arm64 variant of the same Debian (a build argument, so a
                # locally made arm64 base can stand in for the registry's multi-arch one).
                if base.startswith("--platform=linux/arm64 "):
                    base = base.removeprefix("--platform=linux/arm64 ")
                    assert base == "${ARM64_BASE_IMAGE}" and global_args["ARM64_BASE_IMAGE"] == "debian:bookworm-slim"
                    base = global_args["ARM64_BASE_IMAGE"]
                assert base == "debian:bookworm-slim" or base in stages, f"{name}: FROM {base} (DEVICE={device})"
                if alias:
                    stages.append(alias.strip())
    args = dict(rest.split("=", 1) for word, rest in ins if word == "ARG" and "=" in rest)
    requirements = (ROOT / "scripts" / "requirements.txt").read_text()
    pin = re.search(r"^torch==(\S+)", requirements, re.M).group(1)
    assert args["TORCH_VERSION"] == pin, "the images and scripts/setup.sh must use one torch"
    runs = " ".join(rest for word, rest in ins if word == "RUN")
    assert "torch==${TORCH_VERSION}" in runs
    assert "Catch2" not in runs and "catch2" not in runs, "no test framework in the images"


def shared_stages(name):
    text = (ROOT / name).read_text()
    start = text.index("# ---- shared stages")
    return text[start:text.index("# ---- end of the shared stages ----", start)]


def test_training_and_serving_share_their_build_stages():
    # Identical text -> identical layers: building one image reuses the other's toolchain,
    # torch and compile layers.
    assert shared_stages("Dockerfile") == shared_stages("Dockerfile.serving")


def stage_text(name, stage):
    """The instructions of one stage (FROM ... AS STAGE up to the next FROM)."""
    out, inside = [], False
    for word, rest in instructions(name):
        if word == "FROM":
            inside = rest.endswith(f" AS {stage}")
            continue
        if inside:
            out.append((word, rest))
    assert out, f"{name} has no stage {stage}"
    return out


def test_serving_device_selects_a_stage_and_defaults_to_cuda():
    ins = instructions("Dockerfile.serving")
    # A global ARG (before the first FROM) is the only kind a FROM line can use.
    first_from = next(i for i, (word, _) in enumerate(ins) if word == "FROM")
    assert ("ARG", "DEVICE=cuda") in ins[:first_from]
    # The FROM line's own default must be the ARG's: buildah 1.28 picks the stages to build
    # from the FROM line before the ARG's default applies.
    last_word, last_from = [(w, r) for w, r in ins if w == "FROM"][-1]
    assert last_from == "serving-${DEVICE:-cuda}"
    aliases = [r.partition(" AS ")[2] for w, r in ins if w == "FROM" and " AS " in r]
    for device in SERVING_DEVICES:
        assert f"serving-{device}" in aliases
    # The final stage adds no files: everything an image holds comes from its DEVICE stage.
    tail = ins[ins.index((last_word, last_from)) + 1:]
    assert {w for w, _ in tail} <= {"LABEL", "WORKDIR", "EXPOSE", "ENTRYPOINT", "CMD"}


def test_cpu_serving_image_takes_nothing_cuda():
    cpu = stage_text("Dockerfile.serving", "serving-cpu")
    copies = [rest for word, rest in cpu if word == "COPY"]
    # Nothing from the torch stage (its venv has the nvidia-* wheels and libtorch_cuda).
    assert not [c for c in copies if c.startswith("--from=torch ")], copies
    assert not [c for c in copies if "nvidia" in c], copies
    env = " ".join(rest for word, rest in cpu if word == "ENV")
    assert "nvidia" not in env and "NVIDIA_" not in env
    runs = " ".join(rest for word, rest in cpu if word == "RUN")
    assert "ldd" in runs and "cuda" in runs, "the stage checks with ldd that nothing CUDA is loaded"
    build_cpu = " ".join(rest for word, rest in stage_text("Dockerfile.serving", "build-cpu"))
    assert "-DMRCNN_TORCH_CPU_ONLY=ON" in build_cpu and "-DMRCNN_CUDA=OFF" in build_cpu
    assert "elf_drop_needed.py" in build_cpu and "libcudart.so.13 libcupti.so.13" in build_cpu


def test_arm64_serving_image_is_cross_compiled_and_takes_nothing_cuda():
    # toolchain-arm64 (compilers, the wheel's headers and libraries) and build-arm64 (our sources).
    build = " ".join(rest for stage in ("toolchain-arm64", "build-arm64")
                     for word, rest in stage_text("Dockerfile.serving", stage))
    # Compiled natively on the build machine (no --platform: the build machine's Debian), for
    # aarch64, against the aarch64 wheel's CPU libraries without Torch's CMake config.
    assert "-DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-aarch64-linux-gnu.cmake" in build
    assert "-DMRCNN_LIBTORCH_DIR=" in build and "-DMRCNN_TORCH_CPU_ONLY=ON" in build and "-DMRCNN_CUDA=OFF" in build
    assert "--platform manylinux_2_28_aarch64" in build and "torch==${TORCH_VERSION}" in build
    assert "--target entrypoint mrcnn_server" in build, "only what the serving image needs"
    assert "ARM aarch64" in build, "the stage checks with file(1) that it built aarch64 binaries"
    assert "elf_drop_needed.py /opt/torch-cpu-lib/libtorch_cpu.so libcudart.so.13 libcupti.so.13" in build
    assert "libtorch_cuda" not in build and "nvidia/" not in build
    toolchain = (ROOT / "cmake" / "toolchain-aarch64-linux-gnu.cmake").read_text()
    assert "set(CMAKE_SYSTEM_PROCESSOR aarch64)" in toolchain and "aarch64-linux-gnu-g++" in toolchain
    image = stage_text("Dockerfile.serving", "serving-cpu-arm64")
    copies = [rest for word, rest in image if word == "COPY"]
    assert copies and all(c.startswith("--from=build-arm64 ") for c in copies), copies
    runs = " ".join(rest for word, rest in image if word == "RUN")
    assert "ldd" in runs and "cuda" in runs and "not found" in runs
    # The x86 CPU image's run-time packages, arm64 builds of the same (protobuf-lite aside:
    # the server does not link it); each in the run-time stage its image starts from.
    assert ("FROM", "serving-runtime-arm64 AS serving-cpu-arm64") in instructions("Dockerfile.serving")
    assert ("FROM", "serving-runtime AS serving-cpu") in instructions("Dockerfile.serving")
    runs = " ".join(rest for word, rest in stage_text("Dockerfile.serving", "serving-runtime-arm64") if word == "RUN")
    cpu_runs = " ".join(rest for word, rest in stage_text("Dockerfile.serving", "serving-runtime") if word == "RUN")
    def packages(text):
        return set(text.split("--no-install-recommends", 1)[1].split(">/dev/null", 1)[0].split())
    assert packages(runs) == packages(cpu_runs) - {"libprotobuf-lite32"}
    assert {"zlib1g", "libjpeg62-turbo", "libopencv-core406"} <= packages(runs)


def test_build_args_default_to_the_full_images():
    args = dict(rest.split("=", 1) for word, rest in instructions("Dockerfile")
                if word == "ARG" and "=" in rest)
    assert args["WITH_EFA"] == "1"
    assert args["TORCH_CUDA_ARCH_LIST"].strip('"').split(";") == [
        "7.5", "8.0", "8.6", "8.9", "9.0", "10.0+PTX"]


def test_readme_says_volta_is_gone():
    readme = (ROOT / "README.md").read_text()
    assert "CUDA 13 no longer supports Volta" in readme


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


def test_serving_image_declares_what_sagemaker_asks_of_it():
    # SageMaker reads these labels: the port it may pass in SAGEMAKER_BIND_TO_PORT, and that
    # the image can be a multi-model endpoint (SAGEMAKER_MULTI_MODEL=true, serving/README.md).
    labels = {rest for word, rest in instructions("Dockerfile.serving") if word == "LABEL"}
    assert "com.amazonaws.sagemaker.capabilities.accept-bind-to-port=true" in labels
    assert "com.amazonaws.sagemaker.capabilities.multi-models=true" in labels


def stage_graph(name):
    """{stage: (base, [(INSTRUCTION, argument)])} for every named stage of a Dockerfile."""
    graph, current = {}, None
    for word, rest in instructions(name):
        if word == "FROM":
            base, _, alias = rest.partition(" AS ")
            base = base.removeprefix("--platform=linux/arm64 ")
            current = alias.strip() or None
            if current:
                graph[current] = (base, [])
            continue
        if current:
            graph[current][1].append((word, rest))
    return graph


def prepare_targets():
    """(Dockerfile, target) of every build in scripts/test-containers.sh --prepare."""
    text = (ROOT / "scripts" / "test-containers.sh").read_text()
    block = text[text.index("prepare_targets=("):]
    block = block[:block.index("\n  )\n")]
    lines = re.findall(r'"(docker build [^"]+)"', block)
    out = []
    for line in lines:
        words = line.split()
        dockerfile = words[words.index("-f") + 1] if "-f" in words else "Dockerfile"
        out.append((dockerfile, words[words.index("--target") + 1]))
    return out


def test_prepared_stages_hold_none_of_our_sources():
    # .ci/run builds these beside the host build (before anything of ours is compiled), and the
    # full builds must then find them in podman's cache: so neither they nor a stage they start
    # from may copy our sources or a stage that compiles them; a change to our code must not
    # make them stale.
    targets = prepare_targets()
    assert {t for _, t in targets} == {"toolchain", "training-runtime", "serving-runtime", "toolchain-arm64",
                                       "serving-runtime-arm64"}, targets
    for dockerfile, target in targets:
        graph = stage_graph(dockerfile)
        stage = target
        while stage in graph:
            base, body = graph[stage]
            copies = [rest for word, rest in body if word in ("COPY", "ADD")]
            assert not copies, f"{dockerfile}: stage {stage} (before --prepare's {target}) copies {copies}"
            stage = base
        assert stage in ("debian:bookworm-slim", "${ARM64_BASE_IMAGE}"), (dockerfile, target, stage)
    # Every image starts from the prepared stages: the full builds reuse their layers.
    assert ("FROM", "training-runtime") in instructions("Dockerfile")
    for name in ("Dockerfile", "Dockerfile.serving"):
        assert ("FROM", "toolchain AS build") in instructions(name)
    assert ("FROM", "toolchain-arm64 AS build-arm64") in instructions("Dockerfile.serving")
    assert ("FROM", "serving-runtime AS serving-cuda") in instructions("Dockerfile.serving")
