"""trainer/model/'s rooms depend on each other one way (trainer/model/README.md, "Rooms").

Every `#include "trainer/model/..."` in trainer/model/ is checked against what its room may
include:

    the top     (structures, registry, parts, config, ...) the top, backbone/fast_conv.h
    backbone/   the top, backbone/
    proposal_generator/  the top, proposal_generator/, backbone/fast_conv.h
    roi_heads/  the top, roi_heads/, backbone/fast_conv.h
    meta_arch/  the top, meta_arch/, backbone/fast_conv.h, and of the other rooms their
                interfaces only: backbone/backbone.h, proposal_generator/proposal_generator.h,
                roi_heads/roi_heads.h (a meta-architecture gets its parts from the registries)
    inference/  anything of trainer/model (the inference API over the model)
    tiles/      anything of trainer/model (tiled inference, part of that API)
    weights/    weights/ only (Detectron2 and Caffe2 checkpoints read and mapped to our
                names; it knows the model as a torch::nn::Module, nothing of its parts)

so the network knows nothing of the inference API, the proposal generators nothing of the ROI
heads (and the other way round), the backbone nothing of the heads, and a meta-architecture
nothing of the parts the registries give it. Nothing in trainer/model includes the engine, the
commands or the server.

And the model is built as Detectron2's modeling/ is: no friend classes, and no part asks which
family of model it is in (the config's retinanet() / cascade() are for the config's own checks);
a family is a meta-architecture, a set of ROI heads or a head of its own, chosen by registry.
"""
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
MODEL = ROOT / "trainer" / "model"
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)
FAST_CONV = "trainer/model/backbone/fast_conv.h"
ROOMS = {
    "backbone": {"trainer/model/backbone/"},
    "proposal_generator": {"trainer/model/proposal_generator/", FAST_CONV},
    "roi_heads": {"trainer/model/roi_heads/", FAST_CONV},
    "meta_arch": {
        "trainer/model/meta_arch/",
        FAST_CONV,
        "trainer/model/backbone/backbone.h",
        "trainer/model/proposal_generator/proposal_generator.h",
        "trainer/model/roi_heads/roi_heads.h",
    },
    "inference": {"trainer/model/"},
    "tiles": {"trainer/model/"},
    "weights": {"trainer/model/weights/"},
}


def is_top(target):
    return target.startswith("trainer/model/") and "/" not in target[len("trainer/model/"):]


def sources(room):
    folder = MODEL if room is None else MODEL / room
    pattern = "*" if room is None else "**/*"
    return sorted(p for p in folder.glob(pattern) if p.is_file() and p.suffix in {".h", ".cpp"})


def offenders(paths, allowed):
    found = []
    for path in paths:
        for target in INCLUDE.findall(path.read_text(encoding="utf-8")):
            if not target.startswith("trainer/model/"):
                continue
            if is_top(target) or any(target.startswith(a) or target == a for a in allowed):
                continue
            found.append(f"{path.name} includes {target}")
    return found


def test_every_room_has_rules():
    rooms = sorted(p.name for p in MODEL.iterdir() if p.is_dir())
    assert rooms == sorted(ROOMS), "a new folder in trainer/model/ needs its rules here"


@pytest.mark.parametrize("room", sorted(ROOMS))
def test_rooms_include_one_way(room):
    assert sources(room), f"trainer/model/{room}/ has no sources"
    found = offenders(sources(room), ROOMS[room])
    assert not found, f"trainer/model/{room}/ may not include these:\n" + "\n".join(found)


def test_the_top_includes_no_room_but_the_fast_convolution():
    found = offenders(sources(None), {FAST_CONV})
    assert not found, "trainer/model/'s top may not include these:\n" + "\n".join(found)


def test_the_model_includes_nothing_above_it():
    found = []
    for path in sources(None) + [p for room in ROOMS for p in sources(room)]:
        for target in INCLUDE.findall(path.read_text(encoding="utf-8")):
            if target.startswith(("trainer/engine/", "trainer/commands/", "serving/", "entrypoint/")):
                found.append(f"{path.relative_to(ROOT)} includes {target}")
    assert not found, "\n".join(found)


def test_the_rules_refuse_what_they_should(tmp_path):
    assert is_top("trainer/model/structures.h") and not is_top("trainer/model/roi_heads/x.h")
    rpn = tmp_path / "rpn.cpp"
    rpn.write_text('#include "trainer/model/structures.h"\n#include "trainer/model/backbone/fast_conv.h"\n'
                   '#include "trainer/model/roi_heads/x.h"\n#include "trainer/model/inference/y.h"\n')
    assert offenders([rpn], ROOMS["proposal_generator"]) == [
        "rpn.cpp includes trainer/model/roi_heads/x.h",
        "rpn.cpp includes trainer/model/inference/y.h",
    ]
    assert offenders([rpn], ROOMS["inference"]) == []
    arch = tmp_path / "meta.cpp"
    arch.write_text('#include "trainer/model/roi_heads/roi_heads.h"\n'
                    '#include "trainer/model/roi_heads/standard_roi_heads.h"\n')
    assert offenders([arch], ROOMS["meta_arch"]) == [
        "meta.cpp includes trainer/model/roi_heads/standard_roi_heads.h"]
    sample = '#include <vector>\n#include "trainer/model/roi_heads/a.h"\n  # include "kernels/ops.h"\n'
    assert INCLUDE.findall(sample) == ["trainer/model/roi_heads/a.h", "kernels/ops.h"]


# What a part would write to ask which family it is in, and the files allowed to: the config
# defines and checks them.
FAMILY_FLAGS = re.compile(r"\b(retinanet|cascade)\(\)|\bfriend\s+(class|struct)\b")
CONFIG_FILES = {"config.h", "config.cpp"}


def family_flag_offenders(paths):
    found = []
    for path in paths:
        if path.name in CONFIG_FILES:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if FAMILY_FLAGS.search(line.split("//", 1)[0]):
                shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
                found.append(f"{shown}:{number}: {line.strip()}")
    return found


def test_no_part_asks_which_family_it_is_in():
    paths = sources(None) + [p for room in ROOMS for p in sources(room)]
    found = family_flag_offenders(paths)
    assert not found, "family flags or friends in trainer/model:\n" + "\n".join(found)


def test_the_family_rule_refuses_what_it_should(tmp_path):
    probe = tmp_path / "roi_heads.cpp"
    probe.write_text("  if (config_.cascade())\n  friend class RetinaNetStage;\n"
                     "  // config_.retinanet() in a comment\n  bool cascade_ok = true;\n")
    assert family_flag_offenders([probe, tmp_path / "config.cpp"]) == [
        "roi_heads.cpp:1: if (config_.cascade())",
        "roi_heads.cpp:2: friend class RetinaNetStage;",
    ]
